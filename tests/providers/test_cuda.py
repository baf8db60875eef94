"""The CUDA execution provider (docs/cuda.md): the separately built CUDA library and how it is
loaded, provider selection and fallback, device OrtValues, every CUDA kernel against the
CPU kernel of the same node (one-node sessions placed on the GPU), and
sessions whose planner places nodes on the GPU (models CUDA vs CPU, mixed placement, device
outputs, run_async lifetimes). The planner's placement is also checked without a device,
through the test hook session config entry "ortlite.test.cuda_plan_only".

Tests marked `gpu` skip, with the reason, when no CUDA device is usable; the others (build,
loading, provider listing, fallback to the CPU and EPFail without a device) run everywhere."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import ROOT, assert_same, make_model
from helpers import add_model as add_model_bytes
from helpers import node_model_bytes as node_model
from helpers import value_info as _vi
NATIVE = ortlite._ortlite
INFO = NATIVE._cuda_info()
HAS_GPU = INFO["loaded"] and INFO["device_count"] > 0
gpu = pytest.mark.skipif(not HAS_GPU, reason=f"no CUDA device: {INFO['error']}")
no_gpu = pytest.mark.skipif(HAS_GPU, reason="a CUDA device is present")
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
F32, F16, F64 = np.float32, np.float16, np.float64


def _run_py(code, env=None, args=()):
    e = dict(os.environ)
    e.update(env or {})
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=e, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _toolkit_found():
    """setup.py's rule for building the CUDA library: nvcc and cudnn.h are found."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
    if not nvcc and os.path.exists("/usr/local/cuda/bin/nvcc"):
        nvcc = "/usr/local/cuda/bin/nvcc"
    if not nvcc or not os.path.exists(nvcc):
        return False
    home = home or os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    cudnn = os.environ.get("CUDNN_HOME")
    dirs = ([os.path.join(cudnn, "include")] if cudnn else []) + [
        os.path.join(home, "include"), "/usr/local/include", "/usr/include",
        "/usr/include/x86_64-linux-gnu"]
    return any(os.path.exists(os.path.join(d, "cudnn.h")) for d in dirs)


# --- build and loading (run everywhere) --------------------------------------------------------


def test_cuda_library_is_built_when_the_toolkit_is_there():
    lib = os.path.join(os.path.dirname(NATIVE.__file__), "_ortlite_cuda.so")
    assert INFO["library"] == lib
    if os.environ.get("ORTLITE_CUDA") == "0" or not _toolkit_found():
        assert not os.path.exists(lib), "a CPU-only build must not ship the CUDA library"
        assert not INFO["loaded"] and "built without CUDA" in INFO["error"]
    else:
        assert os.path.exists(lib), "nvcc is present but the CUDA library was not built"
        # Loading needs no GPU: only a missing device shows in the error.
        assert INFO["loaded"], INFO["error"]
        assert INFO["abi_version"] >= 1
        if not HAS_GPU:
            assert INFO["device_count"] == 0 and INFO["error"]


def test_importing_ortlite_loads_no_cuda_library_until_cuda_is_asked_for(tmp_path):
    model = tmp_path / "add.onnx"
    model.write_bytes(add_model_bytes())
    out = _run_py(
        "import sys, ortlite, numpy as np\n"
        "def mapped():\n"
        "    text = open('/proc/self/maps').read()\n"
        "    return [n for n in ('_ortlite_cuda', 'libcudart', 'libcublas', 'libcudnn')\n"
        "            if n in text]\n"
        "print('before', mapped())\n"
        "sess = ortlite.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
        "x = np.ones((2, 3), np.float32)\n"
        "sess.run(None, {'x': x, 'y': x})\n"
        "print('cpu_run', mapped())\n"
        "ortlite.get_available_providers()\n"
        "print('after', mapped())\n", args=[str(model)])
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert lines["before"] == "[]"
    assert lines["cpu_run"] == "[]"
    if INFO["loaded"]:
        assert "_ortlite_cuda" in lines["after"]


def test_main_extension_does_not_link_cuda():
    readelf = shutil.which("readelf")
    if not readelf:
        pytest.skip("readelf is not installed")
    out = subprocess.run([readelf, "-d", NATIVE.__file__], capture_output=True, text=True).stdout
    needed = [line for line in out.splitlines() if "NEEDED" in line]
    assert needed and not [n for n in needed if "cuda" in n or "cublas" in n or "cudnn" in n]


def test_missing_or_foreign_library_means_cpu_only():
    code = ("import ortlite\n"
            "i = ortlite._ortlite._cuda_info()\n"
            "print(ortlite.get_available_providers() == ['CPUExecutionProvider'], i['loaded'])\n"
            "print(i['error'])\n")
    out = _run_py(code, {"ORTLITE_CUDA_LIBRARY": "/nonexistent/_ortlite_cuda.so"}).splitlines()
    assert out[0] == "True False" and "built without CUDA" in out[1]
    # A shared object without the entry point (numpy's core extension).
    foreign = np._core._multiarray_umath.__file__
    out = _run_py(code, {"ORTLITE_CUDA_LIBRARY": foreign}).splitlines()
    assert out[0] == "True False" and "does not export ortlite_cuda_api" in out[1]


def test_available_providers():
    expected = [CUDA, CPU] if HAS_GPU else [CPU]
    assert ortlite.get_available_providers() == expected
    assert CUDA in ortlite.get_all_providers()


def test_every_cuda_kernel_has_a_cpu_kernel_for_fallback():
    regs = NATIVE._registered_ops()
    cuda = {(d, op) for d, op, _, _, p in regs if p == CUDA}
    cpu = {(d, op) for d, op, _, _, p in regs if p == CPU}
    assert len(cuda) >= 60
    assert cuda <= cpu, sorted(cuda - cpu)
    for d, op, since, until, p in regs:
        if p == CUDA:
            assert 1 <= since <= until <= 23, (op, since, until)


@no_gpu
def test_cuda_with_cpu_falls_back_with_a_warning_saying_why():
    with pytest.warns(UserWarning, match="CUDAExecutionProvider") as rec:
        sess = ortlite.InferenceSession(add_model_bytes(), providers=[CUDA, CPU])
    assert INFO["error"] in str(rec[0].message)
    assert sess.get_providers() == [CPU]
    x = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "y": x})[0], x + x)


@no_gpu
def test_cuda_alone_without_a_device_falls_back_to_cpu_saying_why():
    with pytest.warns(UserWarning, match="CUDAExecutionProvider") as rec:
        sess = ortlite.InferenceSession(add_model_bytes(), providers=[CUDA])
    assert INFO["error"] in str(rec[0].message)
    assert sess.get_providers() == [CPU]


@no_gpu
def test_device_values_without_a_device_are_epfail():
    x = np.ones((2, 3), F32)
    with pytest.raises(ortlite.EPFail, match="CUDA is not available"):
        ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    with pytest.raises(ortlite.EPFail, match="CUDA is not available"):
        ortlite.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32, "cuda", 0)
    with pytest.raises(ortlite.EPFail):
        NATIVE._cuda_memory_stats(0)


def test_bad_device_arguments():
    x = np.ones(3, F32)
    with pytest.raises(ortlite.InvalidArgument, match="device_type 'tpu'"):
        ortlite.OrtValue.ortvalue_from_numpy(x, "tpu", 0)
    with pytest.raises(TypeError, match="device_id"):
        ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", "0")
    with pytest.raises((ortlite.InvalidArgument, ortlite.EPFail)):
        ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", -1)
    with pytest.raises(ortlite.EPFail):
        ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 1 << 16)


# --- provider selection with a device ------------------------------------------------------


@gpu
def test_cuda_provider_is_selected_and_cpu_appended():
    sess = ortlite.InferenceSession(add_model_bytes(), providers=[CUDA])
    assert sess.get_providers() == [CUDA, CPU]
    sess = ortlite.InferenceSession(add_model_bytes(), providers=[(CUDA, {"device_id": 0}), CPU])
    assert sess.get_providers() == [CUDA, CPU]
    assert sess.get_provider_options()[CUDA] == {"device_id": "0"}
    x = np.ones((2, 3), F32)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "y": x})[0], x + x)


@gpu
def test_cuda_device_id_option_is_checked():
    n = INFO["device_count"]
    with pytest.raises(ortlite.EPFail, match="does not exist"):
        ortlite.InferenceSession(add_model_bytes(), providers=[(CUDA, {"device_id": n}), CPU])
    with pytest.raises(ortlite.EPFail, match="device_id"):
        ortlite.InferenceSession(add_model_bytes(), providers=[(CUDA, {"device_id": "x"}), CPU])


@gpu
def test_device_info():
    d = INFO["devices"][0]
    assert d["id"] == 0 and d["name"] and d["total_memory"] > 0
    assert d["compute_capability"][0] >= 5 and d["multiprocessor_count"] > 0


# --- device OrtValues ----------------------------------------------------------------------


@gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int64, np.int8,
                                   np.uint8, np.bool_])
def test_ortvalue_round_trip(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 5, 7)) * 10).astype(dtype)
    v = ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    assert v.device_name() == "cuda"
    assert v.shape() == [3, 5, 7] and v.tensor_size_in_bytes() == x.nbytes
    assert v.data_ptr() not in (0, x.ctypes.data)
    assert "cuda:0" in repr(v)
    y = v.numpy()
    np.testing.assert_array_equal(y, x)
    assert y.dtype == x.dtype and not np.shares_memory(y, x)
    # A view over a host buffer ortlite owns, kept alive by its base.
    assert y.base is not None and not y.flags.owndata
    x[:] = 0  # the device copy is independent of the source
    np.testing.assert_array_equal(v.numpy(), y)
    z = np.asarray(v)
    np.testing.assert_array_equal(z, y)
    with pytest.raises(ValueError):
        np.array(v, copy=False)


@gpu
def test_ortvalue_device_zeros_update_and_errors():
    v = ortlite.OrtValue.ortvalue_from_shape_and_type([4, 6], np.float32, "cuda", 0)
    assert v.device_name() == "cuda"
    np.testing.assert_array_equal(v.numpy(), np.zeros((4, 6), F32))
    src = np.arange(24, dtype=F32).reshape(4, 6)
    v.update_inplace(src)
    np.testing.assert_array_equal(v.numpy(), src)
    with pytest.raises(ortlite.InvalidArgument, match="shape"):
        v.update_inplace(np.zeros((6, 4), F32))
    with pytest.raises(ortlite.InvalidArgument, match="element type"):
        v.update_inplace(np.zeros((4, 6), F64))
    empty = ortlite.OrtValue.ortvalue_from_numpy(np.zeros((0, 3), F32), "cuda", 0)
    assert empty.numpy().shape == (0, 3)
    with pytest.raises(ortlite.NotImplemented, match="string"):
        ortlite.OrtValue.ortvalue_from_numpy(np.array(["a"], dtype=object), "cuda", 0)
    with pytest.raises(ortlite.EPFail, match="does not exist"):
        ortlite.OrtValue.ortvalue_from_numpy(src, "cuda", INFO["device_count"])


@gpu
def test_device_feeds_run_on_a_cpu_session():
    x = np.arange(6, dtype=F32).reshape(2, 3)
    v = ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    sess = ortlite.InferenceSession(add_model_bytes(), providers=[CPU])
    np.testing.assert_array_equal(sess.run(None, {"x": v, "y": x})[0], x + x)
    out = sess.run_with_ort_values(None, {"x": v, "y": v})[0]
    np.testing.assert_array_equal(out.numpy(), x + x)


@gpu
def test_caching_allocator_reuses_blocks():
    x = np.ones((256, 1024), F32)
    ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    reserved0, _ = NATIVE._cuda_memory_stats(0)
    for _ in range(50):
        v = ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
        del v
    reserved1, in_use = NATIVE._cuda_memory_stats(0)
    assert reserved1 == reserved0
    assert in_use <= reserved1


# --- kernels: CUDA against the CPU kernel of the same node ------------------------------------


def cuda_session(model):
    """A session of a one-node model whose node the planner placed on the GPU."""
    sess = ortlite.InferenceSession(model, providers=[CUDA, CPU])
    where = [p for _, p in sess._node_placement()]
    assert where == [CUDA], f"the node was not placed on the GPU: {where}"
    return sess


def cuda_run(model, feeds, return_ortvalues=False):
    """Runs a one-node model with its CUDA kernel (a one-node session on the GPU): numpy
    outputs, or OrtValues left on the device. Feeds are arrays or OrtValues."""
    sess = cuda_session(model)
    if not return_ortvalues:
        return sess.run(None, feeds)
    ov = {k: v if isinstance(v, ortlite.OrtValue) else ortlite.OrtValue.ortvalue_from_numpy(v)
          for k, v in feeds.items()}
    return sess.run_with_ort_values(None, ov)


def check(op, inputs, outputs, attrs=None, opset=17, consts=(), rtol=1e-5, atol=1e-6):
    """Runs the node with its CUDA kernel and with the CPU session; asserts equal outputs."""
    model, feeds = node_model(op, inputs, outputs, attrs, opset, consts)
    expected = ortlite.InferenceSession(model, providers=[CPU]).run(None, feeds)
    actual = cuda_run(model, feeds)
    assert_same(actual, expected, rtol=rtol, atol=atol)
    return actual


def tol(dtype):
    return {np.dtype(F16): dict(rtol=2e-3, atol=2e-3), np.dtype(F64): dict(rtol=1e-12, atol=1e-12)
            }.get(np.dtype(dtype), dict(rtol=2e-6, atol=1e-6))


RNG = np.random.default_rng(1234)


def rand(*shape, dtype=F32, low=-3.0, high=3.0):
    return np.asarray(RNG.uniform(low, high, shape)).astype(dtype)


BINARY_SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 3)),
                 ((2, 1, 4, 1, 3), (5, 1, 1, 1)), ((1, 1000), (1000, 1))]


@gpu
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Min", "Max", "PRelu"])
@pytest.mark.parametrize("shapes", BINARY_SHAPES)
def test_binary_float(op, shapes):
    a, b = rand(*shapes[0]), rand(*shapes[1])
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(F32)
    if op == "PRelu":  # the slope broadcasts to X
        a = rand(*np.broadcast_shapes(shapes[0], shapes[1]))
    check(op, [("a", a), ("b", b)], [("y", F32)])


@gpu
@pytest.mark.parametrize("dtype", [F16, F64, np.int32, np.int64, np.int8, np.uint8])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max"])
def test_binary_other_types(dtype, op):
    if np.dtype(dtype).kind in "iu":
        a = RNG.integers(-100 if np.dtype(dtype).kind == "i" else 0, 100, (4, 33)).astype(dtype)
        b = RNG.integers(-7 if np.dtype(dtype).kind == "i" else 0, 8, (33,)).astype(dtype)
    else:
        a, b = rand(4, 33, dtype=dtype), rand(33, dtype=dtype, low=0.5, high=2)
    check(op, [("a", a), ("b", b)], [("y", dtype)], opset=14, **tol(dtype))


@gpu
def test_integer_division_edge_cases():
    a = np.array([7, -7, 7, -7, 5, np.iinfo(np.int32).min], np.int32)
    b = np.array([2, 2, -2, -2, 0, -1], np.int32)
    check("Div", [("a", a), ("b", b)], [("y", np.int32)])


@gpu
def test_pow_and_nan_propagation():
    check("Pow", [("a", rand(3, 4, low=0.1)), ("b", rand(4, low=-2, high=2))], [("y", F32)],
          rtol=1e-5)
    a = np.array([1, np.nan, 3, np.nan], F32)
    b = np.array([np.nan, 2, 1, np.nan], F32)
    for op in ("Min", "Max"):
        check(op, [("a", a), ("b", b)], [("y", F32)])


@gpu
@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [F32, np.int64, F16])
def test_comparisons(op, dtype):
    a = RNG.integers(-3, 3, (3, 4, 5)).astype(dtype)
    b = RNG.integers(-3, 3, (4, 1)).astype(dtype)
    check(op, [("a", a), ("b", b)], [("y", np.bool_)], opset=16)


@gpu
@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    a = RNG.integers(0, 2, (3, 4)).astype(bool)
    b = RNG.integers(0, 2, (4,)).astype(bool)
    check(op, [("a", a), ("b", b)], [("y", np.bool_)])
    check("Equal", [("a", a), ("b", b)], [("y", np.bool_)], opset=19)


@gpu
@pytest.mark.parametrize("op", ["Max", "Min", "Sum"])
def test_variadic(op):
    check(op, [("a", rand(2, 3, 4)), ("b", rand(3, 1)), ("c", rand(4))], [("y", F32)])
    check(op, [("a", rand(5))], [("y", F32)])


UNARY = [("Relu", {}), ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}), ("Tanh", {}),
         ("Elu", {"alpha": 0.7}), ("Selu", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
         ("HardSwish", {}), ("Softplus", {}), ("Softsign", {}), ("Exp", {}), ("Log", {}),
         ("Sqrt", {}), ("Abs", {}), ("Neg", {}), ("Reciprocal", {}), ("Erf", {}), ("Sin", {}),
         ("Cos", {}), ("Floor", {}), ("Ceil", {})]


@gpu
@pytest.mark.parametrize("op,attrs", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("dtype", [F32, F16, F64])
def test_unary(op, attrs, dtype):
    positive = op in ("Log", "Sqrt", "Reciprocal")
    x = rand(7, 129, dtype=dtype, low=0.1 if positive else -4, high=4)
    t = tol(dtype)
    if dtype == F32:  # the CPU's vectorized exp / tanh / erf are a few ulp from libm
        t = dict(rtol=1e-5, atol=1e-6)
    check(op, [("x", x)], [("y", dtype)], attrs=attrs, opset=18, **t)


@gpu
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    check("Gelu", [("x", rand(1000))], [("y", F32)], attrs={"approximate": approximate},
          opset=20, rtol=1e-5, atol=1e-6)


@gpu
def test_clip_not():
    x = rand(50)
    check("Clip", [("x", x), ("lo", np.array(-1, F32)), ("hi", np.array(0.5, F32))],
          [("y", F32)], opset=13)
    check("Clip", [("x", x), ("", None), ("hi", np.array(0.5, F32))], [("y", F32)], opset=13)
    check("Clip", [("x", x)], [("y", F32)], opset=13)
    check("Clip", [("x", x)], [("y", F32)], attrs={"min": -0.5, "max": 2.0}, opset=6)
    check("Clip", [("x", x.astype(F64)), ("lo", np.array(0.1, F64))], [("y", F64)], opset=13)
    check("Not", [("x", x > 0)], [("y", np.bool_)])


@gpu
def test_where():
    c = RNG.integers(0, 2, (3, 1, 5)).astype(bool)
    for dtype in (F32, np.int64, F16, np.uint8):
        x, y = rand(4, 5, dtype=dtype), rand(3, 4, 1, dtype=dtype)
        check("Where", [("c", c), ("x", x), ("y", y)], [("o", dtype)])


CAST_TYPES = [F32, F16, F64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
              np.int64, np.uint64, np.bool_]


@gpu
@pytest.mark.parametrize("src", CAST_TYPES)
def test_cast(src):
    base = np.array([0, 1, -1, 2.5, -2.5, 100.7, -100.7, 65000, 3e9, -3e9, 0.4], F64)
    if np.dtype(src).kind in "iub":
        base = np.array([0, 1, 2, 100, 127, 255, 7, 0], F64)
        if np.dtype(src).kind == "i":
            base = np.concatenate([base, [-1, -100, -128]])
    with np.errstate(all="ignore"):
        x = base.astype(src)
    for dst in CAST_TYPES:
        check("Cast", [("x", x)], [("y", dst)], attrs={"to": int(_vi("t", dst).type.tensor_type
                                                                 .elem_type)}, opset=13)


@gpu
def test_cast_nan_and_infinity():
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -0.0], F32)
    for dst in (np.bool_, np.int32, np.int64, F16, np.uint8):
        check("Cast", [("x", x)], [("y", dst)],
              attrs={"to": int(_vi("t", dst).type.tensor_type.elem_type)})


@gpu
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis,opset", [((4, 7), -1, 13), ((2, 3, 2000), -1, 13),
                                              ((2, 5, 3), 1, 13), ((2, 5, 3), 1, 11),
                                              ((3, 1), 0, 13), ((64, 1024), 1, 13)])
def test_softmax(op, shape, axis, opset):
    x = rand(*shape, low=-10, high=10)
    check(op, [("x", x)], [("y", F32)], attrs={"axis": axis}, opset=opset, rtol=1e-5, atol=1e-6)
    check(op, [("x", x.astype(F16))], [("y", F16)], attrs={"axis": axis}, opset=opset,
          rtol=5e-3, atol=5e-3)


@gpu
def test_softmax_with_infinities():
    x = np.array([[1, 2, -np.inf], [-np.inf, -np.inf, 0]], F32)
    check("Softmax", [("x", x)], [("y", F32)], opset=13)


@gpu
@pytest.mark.parametrize("shape,axis", [((2, 3, 8), -1), ((2, 3, 8), 1), ((4, 4096), -1),
                                        ((3, 5), 0)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_normalization(shape, axis, with_bias):
    x = rand(*shape)
    norm = shape[axis if axis >= 0 else len(shape) + axis:]
    inputs = [("x", x), ("s", rand(*norm)), ("b", rand(*norm)) if with_bias else ("", None)]
    check("LayerNormalization", inputs, [("y", F32), ("mean", F32), ("inv", F32)],
          attrs={"axis": axis, "epsilon": 1e-3}, rtol=1e-4, atol=1e-5)
    # Scale broadcast over the normalized dims; float16.
    inputs = [("x", x.astype(F16)), ("s", rand(norm[-1], dtype=F16))]
    check("LayerNormalization", inputs, [("y", F16)], attrs={"axis": axis}, rtol=1e-2, atol=1e-2)


@gpu
@pytest.mark.parametrize("opset", [9, 15])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_batch_normalization(opset, dtype):
    x = rand(2, 3, 4, 5, dtype=dtype)
    params = [("s", rand(3, dtype=dtype)), ("b", rand(3, dtype=dtype)), ("m", rand(3, dtype=dtype)),
              ("v", rand(3, dtype=dtype, low=0.5, high=2))]
    check("BatchNormalization", [("x", x)] + params, [("y", dtype)], attrs={"epsilon": 1e-3},
          opset=opset, **({"rtol": 1e-5, "atol": 1e-5} if dtype == F32 else tol(dtype)))


REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


@gpu
@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, 2], 0), (None, 1), ([-1], 0)])
def test_reductions(op, axes, keepdims):
    positive = op in ("ReduceLogSum", "ReduceProd")
    x = rand(3, 17, 5, low=0.5 if positive else -2, high=1.5 if positive else 2)
    inputs = [("x", x)] + ([("axes", np.array(axes, np.int64))] if axes is not None else [])
    check(op, inputs, [("y", F32)], attrs={"keepdims": keepdims}, opset=18, rtol=1e-5,
          atol=1e-5)


@gpu
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
def test_reduction_layouts_and_types(op):
    # One long reduction (a block per output), many strided columns (a thread per output).
    check(op, [("x", rand(3, 100000)), ("axes", np.array([1], np.int64))], [("y", F32)],
          opset=18, rtol=1e-5, atol=1e-4)
    check(op, [("x", rand(300, 4096)), ("axes", np.array([0], np.int64))], [("y", F32)],
          opset=18, rtol=1e-5, atol=1e-4)
    xi = RNG.integers(-50, 50, (4, 6, 5)).astype(np.int64)
    check(op, [("x", xi), ("axes", np.array([1], np.int64))], [("y", np.int64)], opset=18)
    check(op, [("x", xi.astype(np.int32))], [("y", np.int32)], attrs={"axes": [0, 2]}, opset=11)
    check(op, [("x", rand(4, 6, dtype=F16))], [("y", F16)], opset=18, **tol(F16))


@gpu
def test_reduction_special_cases():
    x = rand(3, 4)
    check("ReduceSum", [("x", x), ("axes", np.zeros(0, np.int64))], [("y", F32)],
          attrs={"noop_with_empty_axes": 1}, opset=18)
    check("ReduceSum", [("x", rand(3, 0, 2)), ("axes", np.array([1], np.int64))], [("y", F32)],
          opset=18)
    check("ReduceMax", [("x", np.array([[1, np.nan, 3]], F32))], [("y", F32)], opset=18)


POOLS = [
    ("MaxPool", (1, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
     12),
    ("MaxPool", (1, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, 12),
    ("MaxPool", (2, 3, 10, 11), {"kernel_shape": [2, 3], "dilations": [2, 1]}, 12),
    ("MaxPool", (2, 3, 20), {"kernel_shape": [4], "strides": [3], "pads": [1, 2]}, 12),
    ("MaxPool", (1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 3]}, 12),
    ("AveragePool", (1, 2, 9, 9), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 11),
    ("AveragePool", (1, 2, 9, 9), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                   "count_include_pad": 1}, 11),
    ("AveragePool", (1, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                   "count_include_pad": 1, "ceil_mode": 1}, 19),
    ("AveragePool", (2, 3, 20), {"kernel_shape": [4], "strides": [3], "auto_pad": "SAME_UPPER"},
     11),
    ("AveragePool", (1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2]}, 11),
]


@gpu
@pytest.mark.parametrize("op,shape,attrs,opset", POOLS)
def test_pooling(op, shape, attrs, opset):
    x = rand(*shape)
    outputs = [("y", F32)] + ([("i", np.int64)] if op == "MaxPool" else [])
    check(op, [("x", x)], outputs, attrs=attrs, opset=opset)
    check(op, [("x", x.astype(F16))], [("y", F16)], attrs=attrs, opset=opset, **tol(F16))


@gpu
def test_max_pool_indices_storage_order():
    check("MaxPool", [("x", rand(1, 2, 6, 7))], [("y", F32), ("i", np.int64)],
          attrs={"kernel_shape": [2, 2], "storage_order": 1}, opset=12)


@gpu
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pooling(op):
    check(op, [("x", rand(2, 3, 7, 9))], [("y", F32)], rtol=1e-5, atol=1e-6)
    check(op, [("x", rand(2, 64, 224))], [("y", F32)], rtol=1e-5, atol=1e-6)


@gpu
@pytest.mark.parametrize("shape,perm", [((2, 3, 4, 5), [0, 2, 1, 3]), ((2, 3, 4), None),
                                        ((256, 130), [1, 0]), ((3, 64, 96), [0, 2, 1]),
                                        ((2, 3, 4, 5, 6, 7), [5, 3, 1, 0, 2, 4])])
@pytest.mark.parametrize("dtype", [F32, F16, np.int64, np.uint8])
def test_transpose(shape, perm, dtype):
    x = rand(*shape, dtype=dtype, low=0, high=100)
    check("Transpose", [("x", x)], [("y", dtype)], attrs={"perm": perm} if perm else {})


@gpu
def test_concat():
    for axis in (0, 1, -1):
        shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
        shapes = [tuple(d + i if k == axis % 3 else d for k, d in enumerate(s))
                  for i, s in enumerate(shapes)]
        inputs = [(f"x{i}", rand(*s)) for i, s in enumerate(shapes)]
        check("Concat", inputs, [("y", F32)], attrs={"axis": axis})
    check("Concat", [("a", rand(2, 0)), ("b", rand(2, 3, dtype=F32))], [("y", F32)],
          attrs={"axis": 1})
    check("Concat", [("a", np.arange(3, dtype=np.int64)), ("b", np.arange(2, dtype=np.int64))],
          [("y", np.int64)], attrs={"axis": 0})


@gpu
@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1], [3], [0], [1]), ([0, 1], [-1, 100], [1, 2], [2, 1]), ([-1], [-1000], [2], [-1]),
    ([5, 0], [0, 4], [0, 1], [-2, 3]), ([0], [0], [0], [1])])
def test_slice(starts, ends, axes, steps):
    x = rand(6, 5, 4)
    ins = [("x", x), ("s", np.array(starts, np.int64)), ("e", np.array(ends, np.int64)),
           ("a", np.array(axes, np.int64)), ("t", np.array(steps, np.int64))]
    check("Slice", ins, [("y", F32)], opset=13)


@gpu
def test_slice_opset9_and_int32_inputs():
    x = rand(6, 5, 4)
    check("Slice", [("x", x)], [("y", F32)], attrs={"starts": [1, 0], "ends": [4, -1],
                                                    "axes": [0, 2]}, opset=9)
    check("Slice", [("x", x), ("s", np.array([1], np.int32)), ("e", np.array([3], np.int32))],
          [("y", F32)], opset=13)


@gpu
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
def test_gather(axis, idx_dtype):
    x = rand(5, 6, 7)
    dim = x.shape[axis]
    idx = np.array([[0, dim - 1], [-1, 2]], idx_dtype)
    check("Gather", [("x", x), ("i", idx)], [("y", F32)], attrs={"axis": axis})
    check("Gather", [("x", x), ("i", idx)], [("y", F32)], attrs={"axis": axis},
          consts=[("i", idx)])
    check("Gather", [("x", x.astype(np.int64)), ("i", np.array(1, idx_dtype))],
          [("y", np.int64)], attrs={"axis": axis})


@gpu
def test_gather_out_of_range_is_invalid_argument():
    x = rand(5, 6)
    idx = np.array([0, 7], np.int64)
    for consts in ((), [("i", idx)]):
        model, feeds = node_model("Gather", [("x", x), ("i", idx)], [("y", F32)], consts=consts)
        with pytest.raises(ortlite.InvalidArgument, match="out of range"):
            cuda_run(model, feeds)


@gpu
def test_expand_and_views():
    x = rand(3, 1, 4)
    check("Expand", [("x", x), ("s", np.array([2, 3, 5, 4], np.int64))], [("y", F32)], opset=13)
    check("Reshape", [("x", x), ("s", np.array([-1, 2], np.int64))], [("y", F32)], opset=14)
    check("Flatten", [("x", x)], [("y", F32)], attrs={"axis": 2}, opset=13)
    check("Squeeze", [("x", x), ("a", np.array([1], np.int64))], [("y", F32)], opset=13)
    check("Unsqueeze", [("x", x), ("a", np.array([0, -1], np.int64))], [("y", F32)], opset=13)
    check("Identity", [("x", x)], [("y", F32)])
    # The view is made on the device; as a session output it never aliases the feed.
    model, feeds = node_model("Reshape", [("x", x), ("s", np.array([12], np.int64))],
                              [("y", F32)], opset=14)
    v = ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    out = cuda_run(model, {"x": v, "s": feeds["s"]}, return_ortvalues=True)[0]
    assert out.device_name() == "cuda" and out.data_ptr() != v.data_ptr()
    np.testing.assert_array_equal(out.numpy(), x.reshape(12))


MATMULS = [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 5)),
           ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
           ((2, 1, 3, 4), (1, 5, 4, 2)), ((5, 3, 0), (5, 0, 2)), ((65, 129), (129, 33))]


@gpu
@pytest.mark.parametrize("sa,sb", MATMULS)
@pytest.mark.parametrize("dtype", [F32, F16, F64])
def test_matmul(sa, sb, dtype):
    t = {np.dtype(F32): dict(rtol=1e-5, atol=1e-4), np.dtype(F16): dict(rtol=1e-2, atol=5e-2)
         }.get(np.dtype(dtype), tol(dtype))
    r = 1.0 if dtype == F16 else 3.0
    a, b = rand(*sa, dtype=dtype, low=-r, high=r), rand(*sb, dtype=dtype, low=-r, high=r)
    check("MatMul", [("a", a), ("b", b)], [("y", dtype)], **t)


@gpu
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("cshape", [None, (5,), (1, 5), (3, 1), (3, 5), ()])
def test_gemm(ta, tb, cshape):
    a = rand(4, 3) if ta else rand(3, 4)
    b = rand(5, 4) if tb else rand(4, 5)
    inputs = [("a", a), ("b", b)] + ([("c", rand(*cshape))] if cshape is not None else [])
    check("Gemm", inputs, [("y", F32)], attrs={"transA": ta, "transB": tb, "alpha": 0.5,
                                               "beta": 2.0}, rtol=1e-5, atol=1e-5)


CONVS = [
    ((1, 3, 9, 9), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 10, 11), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 8, 7, 7), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    ((2, 3, 20), (5, 3, 4), {"strides": [2], "pads": [1, 1]}),
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), {"pads": [0, 1, 1, 0, 1, 1]}),
    ((1, 3, 8, 8), (4, 3, 2, 2), {"auto_pad": "SAME_UPPER"}),
    ((1, 3, 8, 8), (4, 3, 3, 3), {"pads": [0, 1, 2, 1]}),
]


@gpu
@pytest.mark.parametrize("xs,ws,attrs", CONVS)
@pytest.mark.parametrize("bias", [True, False])
def test_conv(xs, ws, attrs, bias):
    inputs = [("x", rand(*xs)), ("w", rand(*ws))] + ([("b", rand(ws[0]))] if bias else [])
    check("Conv", inputs, [("y", F32)], attrs=attrs, rtol=1e-4, atol=1e-4)


@gpu
def test_conv_float16_and_double():
    for dtype, t in ((F16, dict(rtol=2e-2, atol=5e-2)), (F64, tol(F64))):
        r = 1.0 if dtype == F16 else 3.0
        inputs = [("x", rand(1, 3, 9, 9, dtype=dtype, low=-r, high=r)),
                  ("w", rand(4, 3, 3, 3, dtype=dtype, low=-r, high=r)),
                  ("b", rand(4, dtype=dtype, low=-r, high=r))]
        check("Conv", inputs, [("y", dtype)], attrs={"pads": [1, 1, 1, 1]}, **t)


@gpu
def test_kernel_errors_are_typed(capfd):
    # A node the CUDA kernel declines runs on the CPU; the verbose log says why.
    declined = [
        (node_model("Relu", [("x", np.arange(4, dtype=np.int32))], [("y", np.int32)]),
         "int32 is not supported on CUDA"),
        (node_model("Mod", [("a", rand(2)), ("b", rand(2))], [("y", F32)], attrs={"fmod": 1}),
         "no CUDA kernel"),
    ]
    for (model, feeds), why in declined:
        so = ortlite.SessionOptions()
        so.log_severity_level = 0
        capfd.readouterr()
        sess = ortlite.InferenceSession(model, so, providers=[CUDA, CPU])
        assert [p for _, p in sess._node_placement()] == [CPU]
        assert why in capfd.readouterr().err
        sess.run(None, feeds)
    model, feeds = node_model("Add", [("a", rand(2, 3)), ("b", rand(4))], [("y", F32)])
    with pytest.raises(ortlite.InvalidArgument, match="Add"):
        cuda_run(model, feeds)
    model, feeds = node_model("MatMul", [("a", rand(2, 3)), ("b", rand(4, 5))], [("y", F32)])
    with pytest.raises(ortlite.InvalidArgument, match="do not match"):
        cuda_run(model, feeds)
    with pytest.raises(ValueError, match="missing"):
        cuda_run(add_model_bytes(), {"x": rand(2, 3)})


@gpu
def test_device_outputs_repeat_and_no_growth():
    x = rand(64, 256)
    model, feeds = node_model("Softmax", [("x", x)], [("y", F32)], opset=13)
    v = ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    sess = cuda_session(model)
    out = sess.run_with_ort_values(None, {"x": v})[0]
    assert out.device_name() == "cuda"
    for _ in range(5):
        assert len(sess.run(None, {"x": v})) == 1
    reserved0, _ = NATIVE._cuda_memory_stats(0)
    for _ in range(200):
        sess.run_with_ort_values(None, {"x": v})
    assert NATIVE._cuda_memory_stats(0)[0] == reserved0


# --- session placement (phase 2) ------------------------------------------------------------

import gc  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import weakref  # noqa: E402

from helpers import models as test_models  # noqa: E402

PLAN_ONLY = "ortlite.test.cuda_plan_only"


def planned(model_bytes, verbose=False):
    """A session planned as if CUDA were usable (no device touched); it cannot run."""
    so = ortlite.SessionOptions()
    so.add_session_config_entry(PLAN_ONLY, "1")
    if verbose:
        so.log_severity_level = 0
    return ortlite.InferenceSession(model_bytes, so, providers=[CPU])


def placement(sess):
    return [("CUDA" if p == CUDA else "CPU") for _, p in sess._node_placement()]


def by_output(sess):
    """{first output name: 'CUDA' | 'CPU'} from the placement labels."""
    out = {}
    for label, p in sess._node_placement():
        name = label.split("outputs: ")[1].rstrip(")").split(",")[0]
        out[name] = "CUDA" if p == CUDA else "CPU"
    return out


MODELS = {"mlp": test_models.mlp_model, "cnn": test_models.cnn_model,
          "transformer": test_models.transformer_layer_model}


def model_feeds(name, rng):
    shape = {"mlp": (5, 64), "cnn": (2, 3, 32, 32), "transformer": (2, 9, 64)}[name]
    return {"x": rng.standard_normal(shape).astype(F32)}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_planner_places_every_node_of_float_models_on_cuda(name):
    sess = planned(MODELS[name]().SerializeToString())
    assert placement(sess) and set(placement(sess)) == {"CUDA"}
    with pytest.raises(ortlite.NotImplemented, match="without a device"):
        sess.run(None, model_feeds(name, np.random.default_rng(0)))


def mixed_model():
    """Relu -> Hardmax (no CUDA kernel) -> Add, a shape computation feeding Reshape's shape
    input, and an int32 Relu (no CUDA kernel for that type)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Hardmax", ["r"], ["h"], axis=-1),
        helper.make_node("Add", ["h", "r"], ["a"]),
        helper.make_node("Shape", ["a"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["g"], axis=0),
        helper.make_node("Unsqueeze", ["g", "ax"], ["gu"]),
        helper.make_node("Concat", ["gu", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["a", "shape"], ["y"]),
        helper.make_node("Relu", ["k"], ["ky"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"),
             numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    graph = helper.make_graph(
        nodes, "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("k", TensorProto.INT32, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("ky", TensorProto.INT32, None)], initializer=inits,
        # The planner has no type rule for Hardmax: the declared type lets Add go to CUDA.
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def mixed_feeds():
    rng = np.random.default_rng(3)
    return {"x": rng.standard_normal((2, 3, 4)).astype(F32),
            "k": np.array([-2, 0, 5], np.int32)}


def test_planner_mixed_placement_and_shape_only_nodes_stay_on_the_cpu():
    where = by_output(planned(mixed_model()))
    assert where == {"r": "CUDA", "h": "CPU", "a": "CUDA", "s": "CPU", "g": "CPU", "gu": "CPU",
                     "shape": "CPU", "y": "CUDA", "ky": "CPU"}


def test_planner_declines_unknown_types_and_respects_provider_order():
    # An input without a declared element type: no CUDA kernel can be chosen at load.
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 0, None)],
                              [helper.make_tensor_value_info("y", 0, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    assert placement(planned(m.SerializeToString())) == ["CPU"]
    # Add of float and double: the CUDA kernel would refuse it.
    model = make_model([helper.make_node("Add", ["x", "y"], ["z"])],
                       [("x", F32, [2]), ("y", F64, [2])], [("z", F32, [2])])
    assert placement(planned(model.SerializeToString())) == ["CPU"]
    # The CPU before CUDA, or the CPU alone: nothing goes to CUDA.
    assert placement(ortlite.InferenceSession(add_model_bytes(), providers=[CPU])) == ["CPU"]
    if HAS_GPU:
        sess = ortlite.InferenceSession(add_model_bytes(), providers=[CPU, CUDA])
        assert placement(sess) == ["CPU"]


def test_planner_logs_placement_when_verbose(capfd):
    planned(mixed_model(), verbose=True)
    err = capfd.readouterr().err
    assert "node placement" in err
    assert "Hardmax node" in err and "no CUDA kernel" in err
    assert "read only on the host" in err
    planned(mixed_model())
    assert "node placement" not in capfd.readouterr().err


@no_gpu
def test_session_asking_for_cuda_without_a_device_runs_on_the_cpu():
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        sess = ortlite.InferenceSession(mixed_model(), providers=[CUDA, CPU])
    assert set(placement(sess)) == {"CPU"}
    feeds = mixed_feeds()
    ref = ortlite.InferenceSession(mixed_model(), providers=[CPU]).run(None, feeds)
    for got, want in zip(sess.run(None, feeds), ref):
        np.testing.assert_array_equal(got, want)


def cuda_session(model_bytes):
    return ortlite.InferenceSession(model_bytes, providers=[CUDA, CPU])


@gpu
@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_on_cuda_match_the_cpu(name):
    model = MODELS[name]().SerializeToString()
    sess = cuda_session(model)
    assert set(placement(sess)) == {"CUDA"}
    cpu = ortlite.InferenceSession(model, providers=[CPU])
    rng = np.random.default_rng(4)
    for _ in range(2):
        feeds = model_feeds(name, rng)
        got, want = sess.run(None, feeds), cpu.run(None, feeds)
        assert isinstance(got[0], np.ndarray)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


@gpu
def test_mixed_placement_runs_on_cuda_and_cpu():
    sess = cuda_session(mixed_model())
    assert by_output(sess)["h"] == "CPU" and by_output(sess)["a"] == "CUDA"
    feeds = mixed_feeds()
    want = ortlite.InferenceSession(mixed_model(), providers=[CPU]).run(None, feeds)
    for _ in range(2):
        got = sess.run(None, feeds)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(sess.run(["ky"], feeds)[0], want[1])


@gpu
def test_run_with_ort_values_keeps_outputs_on_the_device():
    model = test_models.mlp_model().SerializeToString()
    sess = cuda_session(model)
    x = np.random.default_rng(5).standard_normal((3, 64)).astype(F32)
    want = ortlite.InferenceSession(model, providers=[CPU]).run(None, {"x": x})[0]
    for feed in (ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0),
                 ortlite.OrtValue.ortvalue_from_numpy(x)):
        out = sess.run_with_ort_values(None, {"x": feed})[0]
        assert out.device_name() == "cuda"
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    # A device feed through run() gives numpy results.
    got = sess.run(None, {"x": ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # An output that is a view of a device feed (Identity) is copied on the device.
    ident = make_model([helper.make_node("Identity", ["x"], ["y"])], [("x", F32, [3, 64])],
                       [("y", F32, [3, 64])]).SerializeToString()
    v = ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    out = cuda_session(ident).run_with_ort_values(None, {"x": v})[0]
    assert out.device_name() == "cuda" and out.data_ptr() != v.data_ptr()
    np.testing.assert_array_equal(out.numpy(), x)


@gpu
def test_run_async_on_cuda_keeps_feeds_and_session_alive():
    model = test_models.transformer_layer_model().SerializeToString()
    sess = cuda_session(model)
    x = np.random.default_rng(6).standard_normal((2, 16, 64)).astype(F32)
    want = ortlite.InferenceSession(model, providers=[CPU]).run(None, {"x": x})[0]
    v = ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    wv, wsess = weakref.ref(v), weakref.ref(sess)
    done, got = threading.Event(), {}

    def cb(results, user_data, err):
        got.update(err=err, ok=bool(results) and np.allclose(results[0], want, 1e-4, 1e-4))
        done.set()

    sess.run_async(None, {"x": v}, cb, None)
    del v, sess
    gc.collect()
    assert done.wait(30)
    assert got == {"err": "", "ok": True}
    x2 = x.copy()
    wx2 = weakref.ref(x2)
    fut = cuda_session(model).run_async(None, {"x": x2})
    del x2
    np.testing.assert_allclose(fut.result(30)[0], want, rtol=1e-4, atol=1e-4)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (wx2() or wv() or wsess()) is not None:
        gc.collect()
        time.sleep(0.05)
    assert wx2() is None and wv() is None and wsess() is None


@gpu
def test_cuda_session_errors_name_the_node():
    model = make_model([helper.make_node("Add", ["x", "y"], ["z"])],
                       [("x", F32, ["a"]), ("y", F32, ["b"])], [("z", F32, None)])
    sess = cuda_session(model.SerializeToString())
    assert placement(sess) == ["CUDA"]
    with pytest.raises(ortlite.InvalidArgument, match="Add node"):
        sess.run(None, {"x": np.ones(3, F32), "y": np.ones(4, F32)})
