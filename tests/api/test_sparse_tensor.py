"""ortlite.SparseTensor against onnxruntime's (the oracle for values, shapes, formats and
type strings), its ownership rules (docs/ownership.md "SparseTensor": the arrays are kept
alive, views are read-only and share memory) and its index checks."""

import gc
import sys
import weakref

import numpy as np
import onnxruntime
import pytest

import ortlite
from helpers import add_model

CPU = ortlite.OrtDevice.make("cpu", 0)
ORT_CPU = onnxruntime.OrtDevice.make("cpu", 0)


def both_coo(shape, values, indices):
    return (ortlite.SparseTensor.sparse_coo_from_numpy(shape, values, indices, CPU),
            onnxruntime.SparseTensor.sparse_coo_from_numpy(shape, values, indices, ORT_CPU))


def both_csr(shape, values, inner, outer):
    return (ortlite.SparseTensor.sparse_csr_from_numpy(shape, values, inner, outer, CPU),
            onnxruntime.SparseTensor.sparse_csr_from_numpy(shape, values, inner, outer, ORT_CPU))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.int8,
                                   np.uint16, np.float16, np.bool_])
def test_coo_matches_onnxruntime(dtype):
    values = np.array([1, 2, 3], dtype)
    for indices in (np.array([1, 5, 7], np.int64), np.array([[0, 1], [1, 1], [1, 3]], np.int64)):
        ours, ref = both_coo([2, 4], values, indices)
        assert ours.dense_shape() == ref.dense_shape() == [2, 4]
        assert ours.data_type() == ref.data_type()
        assert int(ours.format()) == int(ref.format()) == 1
        assert ours.format() is ortlite.OrtSparseFormat.ORT_SPARSE_COO
        assert ours.format().name == ref.format().name
        assert ours.device_name() == ref.device_name() == "cpu"
        if dtype in (np.float16, np.bool_):
            # onnxruntime 1.23's values() raises "Unsupported data type" for these.
            np.testing.assert_array_equal(ours.values(), values)
            assert ours.values().dtype == values.dtype
        else:
            np.testing.assert_array_equal(ours.values(), ref.values())
            assert ours.values().dtype == ref.values().dtype
        np.testing.assert_array_equal(ours.as_coo_view().indices(), ref.as_coo_view().indices())


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64])
def test_csr_matches_onnxruntime(dtype):
    values = np.array([1, 2, 3, 4], dtype)
    inner = np.array([1, 0, 2, 3], np.int64)
    outer = np.array([0, 1, 1, 4], np.int64)
    ours, ref = both_csr([3, 4], values, inner, outer)
    assert ours.dense_shape() == ref.dense_shape()
    assert ours.data_type() == ref.data_type()
    assert int(ours.format()) == int(ref.format()) == 2
    assert ours.format().name == ref.format().name == "ORT_SPARSE_CSRC"
    np.testing.assert_array_equal(ours.values(), ref.values())
    np.testing.assert_array_equal(ours.as_csrc_view().inner(), ref.as_csrc_view().inner())
    np.testing.assert_array_equal(ours.as_csrc_view().outer(), ref.as_csrc_view().outer())


def test_string_values_match_onnxruntime():
    values = np.array(["a", "bc", "def"])
    ours, ref = both_coo([9], values, np.array([0, 4, 8], np.int64))
    assert ours.data_type() == ref.data_type() == "sparse_tensor(string)"
    np.testing.assert_array_equal(ours.values(), ref.values())


def test_views_share_memory_and_are_read_only_as_onnxruntime():
    values = np.array([1, 2, 3], np.float32)
    indices = np.array([1, 5, 7], np.int64)
    ours, ref = both_coo([2, 4], values, indices)
    for st in (ours, ref):
        v = st.values()
        assert np.shares_memory(v, values) and not v.flags.writeable
        i = st.as_coo_view().indices()
        assert np.shares_memory(i, indices) and not i.flags.writeable
    with pytest.raises(ValueError):
        ours.values()[0] = 5
    values[0] = 10  # the caller's array is the tensor's memory
    assert ours.values()[0] == 10
    inner, outer = np.array([1, 2], np.int64), np.array([0, 1, 2], np.int64)
    csr = ortlite.SparseTensor.sparse_csr_from_numpy([2, 3], values[:2].copy(), inner, outer, CPU)
    view = csr.as_csrc_view()
    assert np.shares_memory(view.inner(), inner) and np.shares_memory(view.outer(), outer)


def test_sparse_tensor_keeps_its_arrays_alive():
    values = np.array([1, 2, 3], np.float32)
    indices = np.array([1, 5, 7], np.int64)
    base = (sys.getrefcount(values), sys.getrefcount(indices))
    st = ortlite.SparseTensor.sparse_coo_from_numpy([2, 4], values, indices, CPU)
    assert (sys.getrefcount(values), sys.getrefcount(indices)) == (base[0] + 1, base[1] + 1)
    wv, wi = weakref.ref(values), weakref.ref(indices)
    del values, indices
    gc.collect()
    assert wv() is not None and wi() is not None
    np.testing.assert_array_equal(st.values(), [1, 2, 3])
    view = st.as_coo_view()
    vals = st.values()
    ws = weakref.ref(st)
    del st
    gc.collect()
    assert ws() is not None  # held by the view
    np.testing.assert_array_equal(view.indices(), [1, 5, 7])
    del view
    gc.collect()
    assert ws() is None and wi() is None
    assert wv() is not None  # the values view's base is the values array
    del vals
    gc.collect()
    assert wv() is None


def test_refcounts_unchanged_after_many_calls():
    values = np.array([1, 2, 3], np.float32)
    indices = np.array([1, 5, 7], np.int64)
    inner, outer = np.array([1, 2, 3], np.int64), np.array([0, 1, 3], np.int64)
    before = [sys.getrefcount(o) for o in (values, indices, inner, outer, CPU)]
    for _ in range(300):
        st = ortlite.SparseTensor.sparse_coo_from_numpy([2, 4], values, indices, CPU)
        st.values(), st.as_coo_view().indices(), st.dense_shape(), st.format(), st.data_type()
        ov = ortlite.OrtValue.ort_value_from_sparse_tensor(st)
        ov.as_sparse_tensor(), ov.shape(), ov.data_type()
        csr = ortlite.SparseTensor.sparse_csr_from_numpy([2, 4], values, inner, outer, CPU)
        csr.as_csrc_view().inner(), csr.as_csrc_view().outer()
        with pytest.raises(ortlite.InvalidArgument):
            ortlite.SparseTensor.sparse_coo_from_numpy([2, 2], values, indices, CPU)
    del st, ov, csr
    gc.collect()
    assert [sys.getrefcount(o) for o in (values, indices, inner, outer, CPU)] == before


def test_non_contiguous_and_other_integer_inputs_are_copied():
    values = np.arange(6, dtype=np.float32)[::2]
    indices32 = np.array([0, 3, 5], np.int32)
    st = ortlite.SparseTensor.sparse_coo_from_numpy([6], values, indices32, CPU)
    with pytest.raises(RuntimeError, match="contiguous"):  # onnxruntime refuses; ortlite copies
        onnxruntime.SparseTensor.sparse_coo_from_numpy([6], values, indices32, ORT_CPU)
    ref = onnxruntime.SparseTensor.sparse_coo_from_numpy([6], values.copy(), indices32, ORT_CPU)
    np.testing.assert_array_equal(st.values(), ref.values())
    np.testing.assert_array_equal(st.as_coo_view().indices(), ref.as_coo_view().indices())
    assert not np.shares_memory(st.values(), values)
    assert st.as_coo_view().indices().dtype == np.int64
    st = ortlite.SparseTensor.sparse_coo_from_numpy((6,), [1.5, 2.5], [1, 2], None)
    assert st.data_type() == "sparse_tensor(double)"


@pytest.mark.parametrize("indices,match", [
    ([1, 5, 8], "coo index 8 at position 2 is out of range for dense_shape \\[2,4\\]"),
    ([-1, 5, 7], "coo index -1 at position 0 is out of range"),
    ([5, 1, 7], "sorted without duplicates: index 1 at position 1 follows 5"),
    ([1, 5, 5], "sorted without duplicates: index 5 at position 2 follows 5"),
    ([1, 5], "2 linear indices for 3 values"),
    ([[0, 1], [1, 4], [1, 3]], "coo index 4 on axis 1 of entry 1 is out of range"),
    ([[0, 1], [0, 0], [1, 3]], "sorted \\(row-major\\) without duplicates: entry 1"),
    ([[0, 1, 0], [0, 2, 0], [1, 3, 0]], "coordinates for 3 values"),
    ([1.5, 2.0, 3.0], "coo_indices must be an array of integers"),
])
def test_bad_coo_indices_are_typed_errors(indices, match):
    with pytest.raises(ortlite.InvalidArgument, match=match):
        ortlite.SparseTensor.sparse_coo_from_numpy([2, 4], np.array([1, 2, 3], np.float32),
                                                   np.array(indices), CPU)


@pytest.mark.parametrize("shape,inner,outer,match", [
    ([2, 4], [1, 4, 2], [0, 1, 3], "inner index 4 at position 1 \\(row 1\\) is out of range"),
    ([2, 4], [1, 3, 2], [0, 1, 3], "sorted without duplicates within a row: index 2"),
    ([2, 4], [1, 2, 3], [0, 2, 1, 3], "outer_indices has 4 entries"),
    ([2, 4], [1, 2, 3], [1, 1, 3], "outer_indices\\[0\\] is 1"),
    ([2, 4], [1, 2, 3], [0, 1, 2], "outer_indices\\[2\\] is 2, not the number of values 3"),
    ([3, 4], [1, 2, 3], [0, 2, 1, 3], "must not decrease"),
    ([2, 4], [1, 2], [0, 1, 3], "inner_indices has 2 entries for 3 values"),
    ([2, 2, 2], [1, 2, 3], [0, 1, 3], "CSR sparse tensor is 2-D"),
])
def test_bad_csr_indices_are_typed_errors(shape, inner, outer, match):
    with pytest.raises(ortlite.InvalidArgument, match=match):
        ortlite.SparseTensor.sparse_csr_from_numpy(shape, np.array([1, 2, 3], np.float32),
                                                   np.array(inner, np.int64),
                                                   np.array(outer, np.int64), CPU)


def test_other_refusals():
    values = np.array([1, 2, 3], np.float32)
    idx = np.array([1, 5, 7], np.int64)
    st = ortlite.SparseTensor.sparse_coo_from_numpy([2, 4], values, idx, CPU)
    with pytest.raises(ortlite.InvalidArgument, match="does not contain CSR"):
        st.as_csrc_view()
    with pytest.raises(RuntimeError):  # onnxruntime: the same refusal
        onnxruntime.SparseTensor.sparse_coo_from_numpy([2, 4], values, idx, ORT_CPU).as_csrc_view()
    with pytest.raises(ortlite.NotImplemented, match="CPU only"):
        st.to_cuda(ortlite.OrtDevice.make("cuda", 0))
    with pytest.raises(ortlite.NotImplemented, match="block-sparse"):
        st.as_blocksparse_view()
    with pytest.raises(ortlite.NotImplemented, match="live on the CPU"):
        ortlite.SparseTensor.sparse_coo_from_numpy([2, 4], values, idx,
                                                   ortlite.OrtDevice.make("cuda", 0))
    with pytest.raises(ortlite.InvalidArgument, match="1-D"):
        ortlite.SparseTensor.sparse_coo_from_numpy([2, 4], values.reshape(3, 1), idx, CPU)
    with pytest.raises(ortlite.InvalidArgument, match="negative dimension"):
        ortlite.SparseTensor.sparse_coo_from_numpy([-2, 4], values, idx, CPU)
    with pytest.raises(TypeError, match="OrtDevice"):
        ortlite.SparseTensor.sparse_coo_from_numpy([2, 4], values, idx, "cpu")
    with pytest.raises(TypeError):
        ortlite.SparseTensor()
    empty = ortlite.SparseTensor.sparse_csr_from_numpy([2, 4], np.zeros(0, np.float32),
                                                       np.zeros(0, np.int64),
                                                       np.zeros(0, np.int64), CPU)
    assert empty.values().shape == (0,)
    assert "CSRC" in repr(empty) and "nnz=0" in repr(empty)


def test_ortvalue_holding_a_sparse_tensor_matches_onnxruntime():
    values = np.array([1, 2, 3], np.float32)
    idx = np.array([1, 5, 7], np.int64)
    ours, ref = both_coo([2, 4], values, idx)
    ov = ortlite.OrtValue.ort_value_from_sparse_tensor(ours)
    rov = onnxruntime.OrtValue.ort_value_from_sparse_tensor(ref)
    for m in ("is_sparse_tensor", "is_tensor", "data_type", "shape", "has_value",
              "is_tensor_sequence"):
        assert getattr(ov, m)() == getattr(rov, m)(), m
    assert ov.as_sparse_tensor() is ours
    with pytest.raises(ortlite.InvalidArgument, match="sparse tensor, which has no numpy form"):
        ov.numpy()
    dense = ortlite.OrtValue.ortvalue_from_numpy(values)
    assert not dense.is_sparse_tensor()
    with pytest.raises(ortlite.InvalidArgument, match="not a sparse tensor"):
        dense.as_sparse_tensor()
    with pytest.raises(TypeError, match="expects a SparseTensor"):
        ortlite.OrtValue.ort_value_from_sparse_tensor(values)
    w = weakref.ref(ours)
    del ours
    gc.collect()
    assert w() is not None  # the OrtValue holds it
    del ov
    gc.collect()
    assert w() is None


def test_sparse_ortvalue_feed_is_refused_clearly():
    st = ortlite.SparseTensor.sparse_coo_from_numpy([2, 3], np.array([1.0], np.float32),
                                                    np.array([4], np.int64), CPU)
    ov = ortlite.OrtValue.ort_value_from_sparse_tensor(st)
    sess = ortlite.InferenceSession(add_model())
    x = ortlite.OrtValue.ortvalue_from_numpy(np.ones((2, 3), np.float32))
    with pytest.raises(ortlite.NotImplemented, match="sparse tensor cannot be a feed"):
        sess.run(None, {"x": ov, "y": x})
    with pytest.raises(ortlite.NotImplemented, match="sparse tensor cannot be a feed"):
        sess.run_with_ort_values(["z"], {"x": ov, "y": x})


# --- graph outputs declared sparse_tensor -----------------------------------------------------

from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _sparse_out_vi(name, elem, shape):
    v = helper.make_value_info(name, helper.make_sparse_tensor_type_proto(elem, shape))
    return v


def _sparse_constant_model(values, linear_indices, shape, elem=TensorProto.FLOAT):
    # What onnx.helper.make_node("Constant", value=<SparseTensorProto>) writes: the sparse
    # tensor in the 'value' attribute (type SPARSE_TENSOR).
    sp = helper.make_sparse_tensor(numpy_helper.from_array(values, "v"),
                                   numpy_helper.from_array(linear_indices, "i"), shape)
    node = helper.make_node("Constant", [], ["values"], value=sp)
    g = helper.make_graph([node], "g", [], [_sparse_out_vi("values", elem, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


def test_sparse_constant_output_comes_back_sparse_like_onnxruntime():
    data = _sparse_constant_model(np.array([1.7640524, 0.4001572, 0.978738], np.float32),
                                  np.array([2, 3, 5], np.int64), [3, 3])
    ours = ortlite.InferenceSession(data).run_with_ort_values(["values"], {})
    theirs = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    theirs = theirs.run_with_ort_values(["values"], {})
    assert len(ours) == 1 and ours[0].is_sparse_tensor()
    a, b = ours[0].as_sparse_tensor(), theirs[0].as_sparse_tensor()
    assert a.format() == ortlite.OrtSparseFormat.ORT_SPARSE_COO
    assert a.dense_shape() == b.dense_shape() == [3, 3]
    assert a.data_type() == b.data_type() == "sparse_tensor(float)"
    np.testing.assert_array_equal(a.values(), b.values())
    np.testing.assert_array_equal(a.as_coo_view().indices(), b.as_coo_view().indices())
    # run() returns the dense form (onnxruntime returns its SparseTensor object there).
    (dense,) = ortlite.InferenceSession(data).run(None, {})
    np.testing.assert_array_equal(dense.ravel()[[2, 3, 5]], a.values())
    assert np.count_nonzero(dense) == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64,
                                   np.uint8, np.bool_])
def test_computed_output_declared_sparse_keeps_the_non_zeros(dtype):
    # The non-zero elements in row-major order with linear indices (numpy's flatnonzero:
    # -0.0 is a zero, NaN is not).
    rng = np.random.default_rng(3)
    x = (rng.integers(-2, 3, size=(2, 3, 4)) * rng.integers(0, 2, size=(2, 3, 4))).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x.flat[[1, 5]] = [-0.0, np.nan]
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", elem, [2, 3, 4])],
                          [_sparse_out_vi("y", elem, [2, 3, 4])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()
    (y,) = ortlite.InferenceSession(data).run_with_ort_values(
        ["y"], {"x": ortlite.OrtValue.ortvalue_from_numpy(x)})
    sp = y.as_sparse_tensor()
    nz = np.flatnonzero(x)
    assert sp.dense_shape() == [2, 3, 4]
    np.testing.assert_array_equal(sp.as_coo_view().indices(), nz)
    np.testing.assert_array_equal(sp.values(), x.ravel()[nz])
    assert sp.values().dtype == x.dtype


def test_string_output_declared_sparse_is_not_implemented():
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                          [_sparse_out_vi("y", TensorProto.STRING, [2])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()
    sess = ortlite.InferenceSession(data)
    with pytest.raises(ortlite.NotImplemented, match="output 'y' is declared sparse_tensor"):
        sess.run_with_ort_values(
            ["y"], {"x": ortlite.OrtValue.ortvalue_from_numpy(np.array(["a", ""], object))})
