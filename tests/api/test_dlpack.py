"""OrtValue and DLPack: from_dlpack, __dlpack__, __dlpack_device__, to_dlpack, against
onnxruntime's OrtValue (the oracle for values and dtypes) and the ownership rules of
docs/ownership.md "DLPack": zero-copy both ways, the producer's deleter called exactly once,
exported memory alive for as long as the consumer holds it."""

import ctypes
import gc
import sys
import weakref

import numpy as np
import onnxruntime
import pytest

import ortlite
from helpers import add_model

C = onnxruntime.capi._pybind_state
DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.uint16, np.uint32, np.uint64]


# --- a hand-made DLPack producer: counts its deleter's calls -----------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]
# The destructor gets the dying capsule as a raw pointer: a py_object would revive it.
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, CAPSULE_DESTRUCTOR]
_NO_DESTRUCTOR = ctypes.cast(None, CAPSULE_DESTRUCTOR)
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid_ptr = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Producer:
    """A DLPack producer over a numpy array, written with ctypes: the capsule it makes
    calls the deleter only while unconsumed, as the protocol says; `deleted` counts."""

    def __init__(self, arr, device_type=1, code=None, bits=None, strides=None, lanes=1):
        self.arr = arr
        self.deleted = 0
        self.shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        kinds = {"i": 0, "u": 1, "f": 2, "b": 6}
        self.mt = DLManagedTensor()
        t = self.mt.dl_tensor
        t.data = arr.ctypes.data
        t.device = DLDevice(device_type, 0)
        t.ndim = arr.ndim
        t.dtype = DLDataType(kinds[arr.dtype.kind] if code is None else code,
                             8 * arr.itemsize if bits is None else bits, lanes)
        t.shape = self.shape
        t.strides = self.strides if self.strides is not None else None
        t.byte_offset = 0

        def deleter(_ptr):
            self.deleted += 1

        def destructor(cap):
            if _capsule_is_valid_ptr(cap, b"dltensor"):
                self.deleter(ctypes.pointer(self.mt))

        self.deleter = DELETER(deleter)
        self.destructor = CAPSULE_DESTRUCTOR(destructor)
        self.mt.deleter = self.deleter

    def capsule(self):
        return _capsule_new(ctypes.addressof(self.mt), b"dltensor", self.destructor)


# --- import ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_dlpack_matches_onnxruntime_and_shares_memory(dtype):
    a = (np.arange(12) % 7).astype(dtype).reshape(3, 4)
    v = ortlite.OrtValue.from_dlpack(a)
    ref = C.OrtValue.from_dlpack(a.__dlpack__(), False)
    assert v.data_type() == ref.data_type()
    assert v.shape() == ref.shape() == [3, 4]
    np.testing.assert_array_equal(v.numpy(), ref.numpy())
    assert v.data_ptr() == a.ctypes.data
    a[1, 2] = 5
    assert v.numpy()[1, 2] == 5  # the OrtValue reads the producer's memory
    view = v.numpy()
    assert np.shares_memory(view, a) and view.base is v


def test_from_dlpack_accepts_an_object_or_a_capsule_and_consumes_the_capsule():
    a = np.arange(6, dtype=np.float32)
    cap = a.__dlpack__()
    v = ortlite.OrtValue.from_dlpack(cap)
    assert "used_dltensor" in repr(cap)
    with pytest.raises(ortlite.InvalidArgument, match="already consumed"):
        ortlite.OrtValue.from_dlpack(cap)
    np.testing.assert_array_equal(v.numpy(), a)
    v2 = ortlite.OrtValue.from_dlpack(data=a, is_bool_tensor=False)
    assert v2.data_ptr() == a.ctypes.data


def test_from_dlpack_keeps_the_producer_alive_and_releases_it_once():
    a = np.arange(6, dtype=np.float32)
    base = sys.getrefcount(a)
    v = ortlite.OrtValue.from_dlpack(a)
    assert sys.getrefcount(a) == base + 1  # numpy's DLManagedTensor holds the array
    w = weakref.ref(v)
    view = v.numpy()
    del v
    gc.collect()
    assert w() is not None  # the view's base is the OrtValue
    assert sys.getrefcount(a) == base + 1
    del view
    gc.collect()
    assert w() is None
    assert sys.getrefcount(a) == base


def test_producer_array_outlives_its_python_name():
    a = np.arange(1000, dtype=np.float64)
    w = weakref.ref(a)
    v = ortlite.OrtValue.from_dlpack(a)
    del a
    gc.collect()
    assert w() is not None
    np.testing.assert_array_equal(v.numpy(), np.arange(1000, dtype=np.float64))
    del v
    gc.collect()
    assert w() is None


def test_deleter_called_exactly_once_when_the_ortvalue_dies():
    p = Producer(np.arange(4, dtype=np.int32))
    cap = p.capsule()
    v = ortlite.OrtValue.from_dlpack(cap)
    assert _capsule_is_valid(cap, b"used_dltensor")
    del cap
    gc.collect()
    assert p.deleted == 0
    np.testing.assert_array_equal(v.numpy(), [0, 1, 2, 3])
    del v
    gc.collect()
    assert p.deleted == 1


def test_refused_capsule_stays_with_the_producer():
    p = Producer(np.arange(4, dtype=np.int32), device_type=2)  # CUDA
    cap = p.capsule()
    with pytest.raises(ortlite.NotImplemented, match="CUDA.*CPU tensors only"):
        ortlite.OrtValue.from_dlpack(cap)
    assert _capsule_is_valid(cap, b"dltensor")  # not consumed
    assert p.deleted == 0
    del cap
    gc.collect()
    assert p.deleted == 1  # by the producer's own capsule destructor, once


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(lanes=4), ortlite.NotImplemented, "4 lanes"),
    (dict(code=5, bits=64), ortlite.NotImplemented, "complex64 has no ortlite equivalent"),
    (dict(code=2, bits=8), ortlite.NotImplemented, "float8 has no ortlite"),
    (dict(device_type=4), ortlite.NotImplemented, "OpenCL"),
])
def test_unsupported_dlpack_tensors_are_typed_errors(kwargs, error, match):
    p = Producer(np.arange(4, dtype=np.int32), **kwargs)
    cap = p.capsule()
    with pytest.raises(error, match=match):
        ortlite.OrtValue.from_dlpack(cap)
    del cap
    gc.collect()
    assert p.deleted == 1


def test_non_contiguous_dlpack_input_is_refused_clearly():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for bad in (a[:, ::2], a.T):
        cap = bad.__dlpack__()
        with pytest.raises(ortlite.InvalidArgument, match="not C-contiguous.*ascontiguousarray"):
            ortlite.OrtValue.from_dlpack(cap)
        assert "used_dltensor" not in repr(cap)
        with pytest.raises(RuntimeError):  # onnxruntime refuses it too
            C.OrtValue.from_dlpack(bad.__dlpack__(), False)
    # Size-1 dimensions may have any stride; explicit C strides are accepted.
    p = Producer(np.arange(3, dtype=np.int64).reshape(1, 3), strides=[99, 1])
    v = ortlite.OrtValue.from_dlpack(p.capsule())
    np.testing.assert_array_equal(v.numpy(), [[0, 1, 2]])
    np.testing.assert_array_equal(ortlite.OrtValue.from_dlpack(np.ascontiguousarray(a.T)).numpy(),
                                  a.T)


def test_from_dlpack_of_other_objects_is_a_type_error():
    for bad in (5, "x", [1, 2], None):
        with pytest.raises(TypeError, match="__dlpack__"):
            ortlite.OrtValue.from_dlpack(bad)

    class Liar:
        def __dlpack__(self):
            return 3

    with pytest.raises(TypeError, match="not a capsule"):
        ortlite.OrtValue.from_dlpack(Liar())
    with pytest.raises(ortlite.InvalidArgument, match="named 'other'"):
        ortlite.OrtValue.from_dlpack(_capsule_new(8, b"other", _NO_DESTRUCTOR))


def test_bool_as_onnxruntime_uint8_with_is_bool_tensor():
    u = np.array([1, 0, 1, 1], dtype=np.uint8)
    v = ortlite.OrtValue.from_dlpack(u, is_bool_tensor=True)
    ref = C.OrtValue.from_dlpack(u.__dlpack__(), True)
    assert v.data_type() == ref.data_type() == "tensor(bool)"
    np.testing.assert_array_equal(v.numpy(), ref.numpy())
    assert v.numpy().dtype == np.bool_
    assert ortlite.OrtValue.from_dlpack(u).data_type() == "tensor(uint8)"
    # numpy's own bool (DLPack kDLBool), which onnxruntime refuses, is read as bool.
    b = np.array([True, False])
    assert ortlite.OrtValue.from_dlpack(b).data_type() == "tensor(bool)"
    with pytest.raises(ortlite.InvalidArgument, match="is_bool_tensor=True needs uint8"):
        ortlite.OrtValue.from_dlpack(np.zeros(2, np.int32), is_bool_tensor=True)
    # Exported, a bool tensor is uint8, as onnxruntime does it.
    out = np.from_dlpack(ortlite.OrtValue.ortvalue_from_numpy(b))
    ref_out = np.from_dlpack(onnxruntime.OrtValue.ortvalue_from_numpy(b)._ortvalue)
    assert out.dtype == ref_out.dtype == np.uint8
    np.testing.assert_array_equal(out, ref_out)


def test_scalar_and_empty_tensors():
    for a in (np.array(3.5, np.float32), np.zeros((0, 4), np.int64)):
        v = ortlite.OrtValue.from_dlpack(a)
        assert v.shape() == list(a.shape)
        np.testing.assert_array_equal(v.numpy(), a)
        back = np.from_dlpack(ortlite.OrtValue.ortvalue_from_numpy(a))
        assert back.shape == a.shape and back.dtype == a.dtype
        np.testing.assert_array_equal(back, a)


# --- export ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_from_dlpack_round_trip_is_zero_copy(dtype):
    a = (np.arange(6) % 5).astype(dtype).reshape(2, 3)
    v = ortlite.OrtValue.ortvalue_from_numpy(a)
    b = np.from_dlpack(v)
    assert b.dtype == a.dtype and b.shape == a.shape
    assert np.shares_memory(a, b)
    ref = np.from_dlpack(onnxruntime.OrtValue.ortvalue_from_numpy(a)._ortvalue)
    np.testing.assert_array_equal(b, ref)
    a[0, 0] = 4  # numpy marks arrays from unversioned capsules read-only; write the source
    assert b[0, 0] == 4 and v.numpy()[0, 0] == 4
    v2 = ortlite.OrtValue.from_dlpack(v)  # OrtValue -> OrtValue
    assert v2.data_ptr() == v.data_ptr()


def test_exported_memory_lives_as_long_as_the_consumer_holds_it():
    sess = ortlite.InferenceSession(add_model())
    x = np.ones((2, 3), np.float32)
    (z,) = sess.run_with_ort_values(["z"], {"x": ortlite.OrtValue.ortvalue_from_numpy(x),
                                            "y": ortlite.OrtValue.ortvalue_from_numpy(x)})
    w = weakref.ref(z)
    base = sys.getrefcount(z)
    cap = z.__dlpack__()
    assert sys.getrefcount(z) == base + 1  # the capsule's DLManagedTensor holds the OrtValue
    arr = np.from_dlpack(z)
    del z, cap
    gc.collect()
    assert w() is not None
    np.testing.assert_array_equal(arr, np.full((2, 3), 2, np.float32))
    del arr
    gc.collect()
    assert w() is None


def test_unconsumed_capsule_releases_the_ortvalue():
    v = ortlite.OrtValue.ortvalue_from_numpy(np.arange(3, dtype=np.float32))
    base = sys.getrefcount(v)
    for _ in range(100):
        cap = v.__dlpack__()
        cap2 = v.to_dlpack()
        assert "dltensor" in repr(cap2)
        del cap, cap2
    gc.collect()
    assert sys.getrefcount(v) == base


def test_refcounts_of_arguments_unchanged():
    a = np.arange(3, dtype=np.float32)
    v = ortlite.OrtValue.ortvalue_from_numpy(a)
    before = (sys.getrefcount(a), sys.getrefcount(v), sys.getrefcount(True))
    for _ in range(200):
        ortlite.OrtValue.from_dlpack(a, True if False else False)
        np.from_dlpack(v)
        v.__dlpack_device__()
    gc.collect()
    assert (sys.getrefcount(a), sys.getrefcount(v), sys.getrefcount(True)) == before


def test_dlpack_device_and_keywords():
    a = np.arange(3, dtype=np.float32)
    v = ortlite.OrtValue.ortvalue_from_numpy(a)
    assert v.__dlpack_device__() == (1, 0)
    ref = C.OrtValue.from_dlpack(a.__dlpack__(), False)
    assert v.__dlpack_device__() == ref.__dlpack_device__()
    assert np.shares_memory(np.from_dlpack(v, copy=False), a)
    c = np.from_dlpack(v, copy=True)
    assert not np.shares_memory(c, a)
    np.testing.assert_array_equal(c, a)
    np.from_dlpack(v, device="cpu")
    v.__dlpack__(stream=None)
    v.__dlpack__(None)
    with pytest.raises(BufferError, match="dl_device"):
        v.__dlpack__(dl_device=(2, 0))


def test_export_refusals_are_typed():
    with pytest.raises(ortlite.NotImplemented, match=r"tensor\(string\) has no DLPack"):
        ortlite.OrtValue.ortvalue_from_numpy(np.array(["a", "b"])).__dlpack__()
    ro = np.arange(3, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        np.from_dlpack(ortlite.OrtValue.ortvalue_from_numpy(ro))
    # A copy is fine.
    np.testing.assert_array_equal(np.from_dlpack(ortlite.OrtValue.ortvalue_from_numpy(ro),
                                                 copy=True), ro)


def test_dlpack_feed_runs_a_session_like_onnxruntime():
    model = add_model()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.ones((2, 3), np.float32)
    sess = ortlite.InferenceSession(model)
    feeds = {"x": ortlite.OrtValue.from_dlpack(x), "y": ortlite.OrtValue.from_dlpack(y)}
    (out,) = sess.run_with_ort_values(["z"], feeds)
    ref = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    (expected,) = ref.run(["z"], {"x": x, "y": y})
    np.testing.assert_array_equal(np.from_dlpack(out), expected)
    np.testing.assert_array_equal(sess.run(None, feeds)[0], expected)
