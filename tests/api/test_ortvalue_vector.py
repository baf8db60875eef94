"""ortlite.OrtValueVector: a list of OrtValues with onnxruntime's OrtValueVector methods
(push_back, reserve, shrink_to_fit), refusing anything that is not an OrtValue.
onnxruntime's vector (onnxruntime.capi._pybind_state.OrtValueVector) is the oracle for
lengths and element access; what is refused is checked against exact expectations
(onnxruntime 1.23's push_back(None) crashes the process, so it cannot be asked)."""

import numpy as np
import pytest
from onnxruntime.capi import _pybind_state as ort_c

import ortlite


def _values(n):
    return [np.arange(3, dtype=np.float32) + i for i in range(n)]


def test_push_back_len_and_items_match_onnxruntime():
    lite, ort = ortlite.OrtValueVector(), ort_c.OrtValueVector()
    for a in _values(3):
        lite.push_back(ortlite.OrtValue.ortvalue_from_numpy(a))
        ort.push_back(ort_c.OrtValue.ortvalue_from_numpy(a, ort_c.OrtDevice(
            ort_c.OrtDevice.cpu(), ort_c.OrtDevice.default_memory(), 0)))
    assert len(lite) == len(ort) == 3
    for i in range(3):
        np.testing.assert_array_equal(lite[i].numpy(), ort[i].numpy())
    assert [v.numpy()[0] for v in lite] == [0.0, 1.0, 2.0]


def test_constructor_takes_ortvalues_and_is_a_list():
    vals = [ortlite.OrtValue.ortvalue_from_numpy(a) for a in _values(2)]
    vec = ortlite.OrtValueVector(vals)
    assert isinstance(vec, list) and len(vec) == 2
    assert vec[0] is vals[0] and vec[1] is vals[1]
    assert len(ortlite.OrtValueVector()) == 0
    vec.append(vals[0])
    vec.extend(vals)
    vec.insert(0, vals[1])
    vec[1] = vals[1]
    vec[0:2] = vals
    assert len(vec) == 6 and vec[0] is vals[0] and vec[1] is vals[1]


@pytest.mark.parametrize("bad", [np.zeros(2, np.float32), 1, None, "x"])
def test_non_ortvalues_are_refused(bad):
    vec = ortlite.OrtValueVector([ortlite.OrtValue.ortvalue_from_numpy(np.zeros(1))])
    for call in (lambda: vec.push_back(bad), lambda: vec.append(bad),
                 lambda: vec.extend([bad]), lambda: vec.insert(0, bad),
                 lambda: vec.__setitem__(0, bad), lambda: vec.__setitem__(slice(0, 1), [bad]),
                 lambda: ortlite.OrtValueVector([bad])):
        with pytest.raises(TypeError, match="OrtValueVector holds OrtValues"):
            call()
    assert len(vec) == 1


def test_reserve_and_shrink_to_fit():
    vec = ortlite.OrtValueVector()
    vec.reserve(10)
    vec.shrink_to_fit()
    assert len(vec) == 0
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(TypeError, match="reserve expects a non-negative int"):
            vec.reserve(bad)


def test_exported_under_the_module():
    assert ortlite.OrtValueVector.__module__ == "ortlite"
    assert "push_back" in dir(ortlite.OrtValueVector)
