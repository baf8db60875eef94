#!/usr/bin/env bash
# Device checks of the CUDA provider, for a machine with an NVIDIA GPU (docs/cuda.md):
#   build      with ORTLITE_CUDA=1, timed. With a Python environment already there (.venv, or
#              ORTLITE_PY naming an interpreter that has numpy, onnx, onnxruntime, pytest,
#              setuptools and scipy-openblas32) it builds with setup.py directly and never
#              calls pip; only without any does it run `make build`, which creates .venv and
#              needs pip's index (the device machine has no network: see docs/cuda.md).
#   info       nvidia-smi and ortlite._ortlite._cuda_info()
#   tests      tests/providers/test_cuda.py; fails when its GPU tests skip
#   memcheck   compute-sanitizer memcheck (plain cudaMalloc per buffer, so bounds are exact)
#              and racecheck over a short run of every CUDA kernel
#   bench      cuBLAS GEMM TFLOP/s (FP32, TF32, FP16), kernel latency on the GPU vs the same
#              node on the CPU, and whole-model latency (MLP, CNN, transformer layer of
#              tests/models/test_models.py) of a CUDA session vs a CPU session
# Run from the repository root: tools/gpu_check.sh [--quick] [--skip-build]
# Logs and results.json go to build/gpu_check/; the exit status is non-zero when a step fails.
set -uo pipefail
cd "$(dirname "$0")/.."

QUICK=0
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --skip-build) BUILD=0 ;;
    *) echo "usage: tools/gpu_check.sh [--quick] [--skip-build]" >&2; exit 2 ;;
  esac
done

OUT=build/gpu_check
mkdir -p "$OUT"
FAILED=()
# The interpreter: ORTLITE_PY, else .venv's, else a python3 that has the packages.
PY=${ORTLITE_PY:-}
if [ -z "$PY" ] && [ -x .venv/bin/python ] && .venv/bin/python -c "import numpy" 2>/dev/null; then
  PY=.venv/bin/python
fi
if [ -z "$PY" ] && python3 -c "import numpy, onnx, pytest" 2>/dev/null; then
  PY=$(command -v python3)
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

# step NAME CMD...: runs CMD with its output in $OUT/NAME.log, reports time and status.
step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "== $name: $*"
  if "$@" >"$OUT/$name.log" 2>&1; then
    echo "   ok ($((SECONDS - t0)) s)"
  else
    echo "   FAILED ($((SECONDS - t0)) s); last lines of $OUT/$name.log:"
    tail -n 40 "$OUT/$name.log" | sed 's/^/   | /'
    FAILED+=("$name")
  fi
}

if [ "$BUILD" = 1 ]; then
  mkdir -p build
  if [ -n "$PY" ]; then
    # An existing environment: no pip (the device machine has no network).
    step build env ORTLITE_CUDA=1 "$PY" setup.py -q build_ext --inplace
  else
    step build env ORTLITE_CUDA=1 make build
    PY=.venv/bin/python
  fi
fi
if [ -z "$PY" ] || ! "$PY" -c "import numpy" 2>/dev/null; then
  echo "no usable Python environment (.venv, ORTLITE_PY or python3 with numpy, onnx, pytest)" >&2
  exit 1
fi
echo "== python: $PY"

step info bash -c "nvidia-smi; $PY -c 'import ortlite, pprint; pprint.pprint(ortlite._ortlite._cuda_info())'"
cat "$OUT/info.log"

tests() {
  "$PY" -m pytest -q -p no:cacheprovider tests/providers/test_cuda.py -rs || return 1
}
step tests tests
if grep -q "no CUDA device" "$OUT/tests.log"; then
  echo "   the GPU tests were skipped: no usable CUDA device"
  FAILED+=("tests-skipped")
fi

# A short run of every CUDA kernel family, for the sanitizers.
cat >"$OUT/kernels_smoke.py" <<'EOF'
import numpy as np
from onnx import TensorProto, helper, numpy_helper

import ortlite



def run(model, feeds):
    # A one-node session on the GPU (the node must be placed there).
    sess = ortlite.InferenceSession(
        model, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    where = [p for _, p in sess._node_placement()]
    assert where == ["CUDAExecutionProvider"], where
    return sess.run(None, feeds)

rng = np.random.default_rng(0)
T = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
     np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.float16): TensorProto.FLOAT16}


def node(op, inputs, outputs, opset=17, **attrs):
    graph = helper.make_graph(
        [helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], **attrs)], "g",
        [helper.make_tensor_value_info(n, T[a.dtype], None) for n, a in inputs],
        [helper.make_tensor_value_info(n, T[np.dtype(d)], None) for n, d in outputs])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return run(m.SerializeToString(), dict(inputs))


f = lambda *s: rng.standard_normal(s).astype(np.float32)
i64 = lambda *v: np.array(v, np.int64)
F = np.float32
node("Add", [("a", f(4, 33)), ("b", f(33))], [("y", F)])
node("Less", [("a", f(4, 33)), ("b", f(4, 1))], [("y", np.bool_)])
node("Sigmoid", [("x", f(1000))], [("y", F)])
node("Where", [("c", f(3, 4) > 0), ("x", f(3, 4)), ("y", f(4))], [("o", F)])
node("Cast", [("x", f(100))], [("y", np.float16)], to=TensorProto.FLOAT16)
node("Softmax", [("x", f(8, 3000))], [("y", F)], opset=13)
node("Softmax", [("x", f(4, 5, 6))], [("y", F)], opset=13, axis=1)
node("LayerNormalization", [("x", f(4, 2000)), ("s", f(2000)), ("b", f(2000))], [("y", F)])
node("LayerNormalization", [("x", f(4, 64)), ("s", f(64))], [("y", F)])
node("BatchNormalization", [("x", f(2, 3, 4, 4)), ("s", f(3)), ("b", f(3)), ("m", f(3)),
                            ("v", np.abs(f(3)) + 1)], [("y", F)], opset=15)
node("ReduceSum", [("x", f(3, 20000)), ("a", i64(1))], [("y", F)], opset=18)
node("ReduceMax", [("x", f(400, 3000)), ("a", i64(0))], [("y", F)], opset=18)
node("ReduceLogSumExp", [("x", f(30, 50, 7)), ("a", i64(1))], [("y", F)], opset=18)
node("MaxPool", [("x", f(1, 2, 9, 9))], [("y", F), ("i", np.int64)], opset=12,
     kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
node("AveragePool", [("x", f(1, 2, 9, 9))], [("y", F)], kernel_shape=[3, 3], ceil_mode=1,
     strides=[2, 2])
node("GlobalAveragePool", [("x", f(2, 3, 7, 7))], [("y", F)])
node("Transpose", [("x", f(3, 70, 50))], [("y", F)], perm=[0, 2, 1])
node("Transpose", [("x", f(2, 3, 4, 5))], [("y", F)], perm=[3, 1, 0, 2])
node("Concat", [("a", f(2, 3)), ("b", f(2, 5))], [("y", F)], axis=1)
node("Slice", [("x", f(6, 5)), ("s", i64(5)), ("e", i64(-10)), ("ax", i64(0)), ("t", i64(-2))],
     [("y", F)], opset=13)
node("Gather", [("x", f(5, 6)), ("i", i64(0, -1, 3))], [("y", F)], axis=1)
try:
    node("Gather", [("x", f(5, 6)), ("i", i64(0, 9))], [("y", F)], axis=1)
except ortlite.InvalidArgument:
    pass
node("Expand", [("x", f(3, 1)), ("s", i64(2, 3, 4))], [("y", F)], opset=13)
node("MatMul", [("a", f(2, 1, 33, 17)), ("b", f(3, 17, 9))], [("y", F)])
node("MatMul", [("a", f(64, 64).astype(np.float16)), ("b", f(64, 64).astype(np.float16))],
     [("y", np.float16)])
node("Gemm", [("a", f(5, 7)), ("b", f(9, 7)), ("c", f(9))], [("y", F)], transB=1, beta=0.5)
node("Conv", [("x", f(2, 4, 11, 11)), ("w", f(6, 2, 3, 3)), ("b", f(6))], [("y", F)], group=2,
     pads=[1, 1, 1, 1])
node("Conv", [("x", f(1, 3, 8, 8)), ("w", f(4, 3, 2, 2))], [("y", F)], auto_pad="SAME_UPPER")
node("Reshape", [("x", f(3, 4)), ("s", i64(-1))], [("y", F)], opset=14)
v = ortlite.OrtValue.ortvalue_from_numpy(f(1000), "cuda", 0)
assert np.array_equal(v.numpy(), v.numpy())
# Sessions placing nodes on the GPU: copies, device constants, the run's stream.
import sys  # noqa: E402
sys.path.insert(0, "tests")
import test_models  # noqa: E402
for build, shape in ((test_models.mlp_model, (4, 64)), (test_models.cnn_model, (1, 3, 32, 32)),
                     (test_models.transformer_layer_model, (2, 8, 64))):
    s = ortlite.InferenceSession(build().SerializeToString(),
                                 providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    x = rng.standard_normal(shape).astype(np.float32)
    s.run(None, {"x": x})
    s.run_with_ort_values(None, {"x": ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)})
print("kernels smoke run: ok")
EOF

SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SANITIZER" ]; then
  step memcheck env ORTLITE_CUDA_ALLOCATOR=plain "$SANITIZER" --tool memcheck \
    --error-exitcode 9 "$PY" "$OUT/kernels_smoke.py"
  step racecheck "$SANITIZER" --tool racecheck --error-exitcode 9 "$PY" "$OUT/kernels_smoke.py"
else
  echo "== memcheck: compute-sanitizer not found, skipped"
  FAILED+=("memcheck-missing")
fi

cat >"$OUT/bench.py" <<'EOF'
import json
import sys
import time

import numpy as np
from onnx import TensorProto, helper

import ortlite

quick = "--quick" in sys.argv
native = ortlite._ortlite
T = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
     np.dtype(np.int64): TensorProto.INT64}
rng = np.random.default_rng(0)
results = {"device": native._cuda_info()["devices"][0]}


def model(op, inputs, out_dtype, opset=17, **attrs):
    graph = helper.make_graph(
        [helper.make_node(op, [n for n, _ in inputs], ["y"], **attrs)], "g",
        [helper.make_tensor_value_info(n, T[a.dtype], None) for n, a in inputs],
        [helper.make_tensor_value_info("y", T[np.dtype(out_dtype)], None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def gpu_ms(data, inputs, repeat):
    # Inputs resident on the device, outputs left there: a one-node session's run() time
    # (the kernel, its launch and the run's stream sync), median of `repeat`.
    sess = ortlite.InferenceSession(
        data, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    feeds = {n: ortlite.OrtValue.ortvalue_from_numpy(a, "cuda" if a.dtype != np.int64 else "cpu", 0)
             for n, a in inputs}
    sess.run_with_ort_values(None, feeds)  # warm-up (cuDNN search)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run_with_ort_values(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def cpu_ms(data, inputs, repeat):
    sess = ortlite.InferenceSession(data, providers=["CPUExecutionProvider"])
    feeds = dict(inputs)
    sess.run(None, feeds)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


gemm = []
sizes = [1024, 4096] if quick else [1024, 2048, 4096, 8192]
for dtype, tf32 in ((np.float32, False), (np.float32, True), (np.float16, False)):
    native._cuda_set_allow_tf32(tf32)
    for n in sizes:
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
        ms = gpu_ms(model("MatMul", [("a", a), ("b", b)], dtype), [("a", a), ("b", b)],
                    5 if n >= 8192 else 20)
        name = "tf32" if tf32 else np.dtype(dtype).name
        gemm.append({"type": name, "n": n, "ms": ms, "tflops": 2 * n**3 / (ms * 1e-3) / 1e12})
        print(f"GEMM {name:8s} {n:5d}^3: {ms:8.3f} ms  {gemm[-1]['tflops']:7.2f} TFLOP/s",
              flush=True)
native._cuda_set_allow_tf32(False)
results["gemm"] = gemm

f = lambda *s: rng.standard_normal(s).astype(np.float32)
cases = [
    ("MatMul 1024x1024x1024", "MatMul", [("a", f(1024, 1024)), ("b", f(1024, 1024))], {}),
    ("Conv 8x64x56x56 3x3", "Conv", [("x", f(8, 64, 56, 56)), ("w", f(64, 64, 3, 3))],
     {"pads": [1, 1, 1, 1]}),
    ("Add 4096x1024 + 1024", "Add", [("a", f(4096, 1024)), ("b", f(1024))], {}),
    ("Softmax 512x1024", "Softmax", [("x", f(512, 1024))], {}),
    ("LayerNorm 4096x1024", "LayerNormalization",
     [("x", f(4096, 1024)), ("s", f(1024)), ("b", f(1024))], {}),
    ("ReduceSum 4096x1024 axis 1", "ReduceSum", [("x", f(4096, 1024)),
                                                  ("a", np.array([1], np.int64))], {}),
    ("Transpose 64x512x512 (0,2,1)", "Transpose", [("x", f(64, 512, 512))], {"perm": [0, 2, 1]}),
    ("MaxPool 8x64x112x112 3x3/2", "MaxPool", [("x", f(8, 64, 112, 112))],
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("Gelu 4096x4096", "Gelu", [("x", f(4096, 4096))], {}),
]
latency = []
for name, op, inputs, attrs in cases[:4] if quick else cases:
    opset = 20 if op == "Gelu" else 17
    data = model(op, inputs, np.float32, opset=opset, **attrs)
    g = gpu_ms(data, inputs, 20)
    c = cpu_ms(data, inputs, 3 if quick else 5)
    latency.append({"case": name, "gpu_ms": g, "cpu_ms": c, "speedup": c / g})
    print(f"{name:32s} GPU {g:9.3f} ms   CPU {c:9.3f} ms   x{c / g:8.1f}", flush=True)
results["kernels"] = latency

# Whole models: a session placing nodes on the GPU vs a CPU session. run() includes the
# host-to-device copy of the feed and the device-to-host copy of the output;
# run_with_ort_values with a device feed keeps both on the device.
sys.path.insert(0, "tests")
import test_models  # noqa: E402

CUDA_EPS = ["CUDAExecutionProvider", "CPUExecutionProvider"]


def session_ms(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


model_cases = [
    ("mlp", test_models.mlp_model, [(1, 64), (256, 64)]),
    ("cnn", test_models.cnn_model, [(1, 3, 32, 32), (32, 3, 32, 32)]),
    ("transformer", test_models.transformer_layer_model, [(1, 16, 64), (8, 128, 64)]),
]
models = []
for name, build, shapes in model_cases:
    data = build().SerializeToString()
    gpu_sess = ortlite.InferenceSession(data, providers=CUDA_EPS)
    cpu_sess = ortlite.InferenceSession(data, providers=["CPUExecutionProvider"])
    placed = [p for _, p in gpu_sess._node_placement()]
    for shape in shapes[:1] if quick else shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        feeds = {"x": x}
        dev = {"x": ortlite.OrtValue.ortvalue_from_numpy(x, "cuda", 0)}
        repeat = 10 if quick else 30
        g = session_ms(lambda: gpu_sess.run(None, feeds), repeat)
        gd = session_ms(lambda: gpu_sess.run_with_ort_values(None, dev), repeat)
        c = session_ms(lambda: cpu_sess.run(None, feeds), repeat)
        diff = float(np.max(np.abs(gpu_sess.run(None, feeds)[0] - cpu_sess.run(None, feeds)[0])))
        models.append({"model": name, "input": list(shape), "gpu_ms": g, "gpu_device_io_ms": gd,
                       "cpu_ms": c, "speedup": c / g, "max_abs_diff": diff,
                       "nodes_on_cuda": placed.count("CUDAExecutionProvider"),
                       "nodes": len(placed)})
        print(f"{name:12s} {str(shape):18s} GPU {g:8.3f} ms (device I/O {gd:8.3f} ms)   "
              f"CPU {c:8.3f} ms   x{c / g:6.1f}   max|diff| {diff:.2e}   "
              f"{models[-1]['nodes_on_cuda']}/{len(placed)} nodes on CUDA", flush=True)
results["models"] = models
json.dump(results, open(sys.argv[1], "w"), indent=1)
EOF
step bench "$PY" "$OUT/bench.py" "$OUT/results.json" $([ "$QUICK" = 1 ] && echo --quick)
cat "$OUT/bench.log"

if [ ${#FAILED[@]} -gt 0 ]; then
  echo "gpu_check: FAILED: ${FAILED[*]}"
  exit 1
fi
echo "gpu_check: all steps passed"
