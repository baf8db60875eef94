"""Shared test helpers: build models with onnx.helper, run them on ortlite and on
onnxruntime (the reference oracle), compare; paths and subprocess environments.
helpers.pb_encode writes protobuf encodings onnx never writes; helpers.models holds the
float models (MLP, CNN, transformer layer) several test files run."""

import os

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import ortlite

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
ROOT = os.path.dirname(TESTS)  # the repository root
DATA = os.path.join(TESTS, "data")

# onnxruntime's own limit, not ortlite's (that is ortlite.NEWEST_OPSET): the newest
# default-domain opset the pinned onnxruntime runs.
ORT_MAX_OPSET = 23

NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(object): TensorProto.STRING,
}


def onnx_type(dtype):
    return NP_TO_ONNX[np.dtype(dtype)]


def make_model(nodes, inputs, outputs, initializers=(), opset=17, ir_version=None,
               functions=(), extra_opsets=()):
    """inputs/outputs: lists of (name, np dtype or onnx enum, shape or None)."""

    def vi(spec):
        name, dt, shape = spec
        elem = dt if isinstance(dt, int) else onnx_type(dt)
        return helper.make_tensor_value_info(name, elem, shape)

    graph = helper.make_graph(list(nodes), "g", [vi(i) for i in inputs],
                              [vi(o) for o in outputs], initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    # Keep the IR version within what the pinned onnxruntime reads.
    model.ir_version = ir_version if ir_version is not None else min(model.ir_version, 10)
    return model


def run_ort(model, feeds, output_names=None):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxruntime.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return sess.run(output_names, feeds)


def run_ortlite(model, feeds, output_names=None):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    sess = ortlite.InferenceSession(data)
    return sess.run(output_names, feeds)


def model_bytes(model):
    """A ModelProto serialized; bytes and paths unchanged."""
    return model.SerializeToString() if isinstance(model, onnx.ModelProto) else model


def session(model, threads=None, level=None, options=None):
    """An ortlite session of a ModelProto, bytes or a path. threads (when truthy): intra-op
    threads; level: graph_optimization_level. options=True passes a SessionOptions even
    when neither is set; the default passes one only when one of them is."""
    if options is None:
        options = bool(threads) or level is not None
    if not options:
        return ortlite.InferenceSession(model_bytes(model))
    so = ortlite.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    if level is not None:
        so.graph_optimization_level = level
    return ortlite.InferenceSession(model_bytes(model), sess_options=so)


def run_lite(model, feeds, threads=None, level=None, options=None):
    """All outputs of one ortlite run (session()'s arguments)."""
    return session(model, threads, level, options).run(None, feeds)


def assert_same(actual, expected, rtol=1e-5, atol=1e-6):
    assert len(actual) == len(expected), (len(actual), len(expected))
    for i, (a, e) in enumerate(zip(actual, expected)):
        a = np.asarray(a)
        e = np.asarray(e)
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} != {e.dtype}"
        assert a.shape == e.shape, f"output {i}: shape {a.shape} != {e.shape}"
        if e.dtype == object or e.dtype.kind in "biuU?":
            np.testing.assert_array_equal(a, e, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"output {i}")


def check_against_ort(model, feeds, rtol=1e-5, atol=1e-6, output_names=None):
    """Runs both runtimes and asserts equal outputs; returns ortlite's."""
    expected = run_ort(model, feeds, output_names)
    actual = run_ortlite(model, feeds, output_names)
    assert_same(actual, expected, rtol=rtol, atol=atol)
    return actual


def check_against_reference(model, feeds, **tol):
    """ortlite against onnx.reference.ReferenceEvaluator; returns ortlite's outputs."""
    from onnx.reference import ReferenceEvaluator

    expected = ReferenceEvaluator(model).run(None, feeds)
    actual = run_ortlite(model, feeds)
    assert_same(actual, [np.asarray(e) for e in expected], **tol)
    return actual


def rng(seed=0):
    return np.random.default_rng(seed)


def randn(shape, seed, scale=1.0, dtype=np.float32):
    """Seeded standard-normal data times scale."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def strings(*values):
    return np.array(values, dtype=object)


# --- one-node and small models ---------------------------------------------------------------


def _elem(dtype):
    dtype = np.dtype(dtype)
    return NP_TO_ONNX[dtype] if dtype in NP_TO_ONNX else helper.np_dtype_to_tensor_dtype(dtype)


def node_model(op, inputs, outputs, out_dtypes=None, attrs=None, opset=17, consts=None,
               order=None, out_elems=None, max_ir=10, cap_newer=False):
    """One node. inputs: graph inputs (name -> array); consts: initializers (name -> array);
    order: the node's input names ("" for an omitted one), default inputs then consts.
    outputs: names ("" for an omitted one, not a graph output); out_dtypes: their dtypes
    (default: the first input's), or out_elems: their ONNX element types. The IR version is
    capped at max_ir for the opsets onnxruntime runs (<= ORT_MAX_OPSET), and for newer ones
    too when cap_newer."""
    consts = consts or {}
    names = order if order is not None else list(inputs) + list(consts)
    node = helper.make_node(op, names, outputs, **(attrs or {}))
    if out_elems is None:
        if inputs:
            first = next(iter(inputs.values()))
        elif consts:
            first = next(iter(consts.values()))
        else:
            first = np.zeros(1, np.float32)
        out_dtypes = out_dtypes or [first.dtype] * len(outputs)
        out_elems = [_elem(d) for d in out_dtypes]
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, _elem(np.asarray(a).dtype), list(a.shape))
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(o, e, None) for o, e in zip(outputs, out_elems) if o],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if opset <= ORT_MAX_OPSET or cap_newer:
        model.ir_version = min(model.ir_version, max_ir)
    return model


def value_info(name, dtype):
    elem = dtype if isinstance(dtype, int) else _elem(dtype)
    return helper.make_tensor_value_info(name, elem, None)


def node_model_bytes(op, inputs, outputs, attrs=None, opset=17, consts=()):
    """inputs: [(name, array)] fed at run time ("" for an omitted input: pass (""), None));
    consts: [(name, array)] initializers; outputs: [(name, dtype)]. Returns the serialized
    IR 8 model and its feeds (the inputs that are not initializers)."""
    names = [n for n, _ in inputs]
    node = helper.make_node(op, names, [n for n, _ in outputs], **(attrs or {}))
    feeds = [(n, a) for n, a in inputs if n and all(n != c for c, _ in consts)]
    graph = helper.make_graph(
        [node], "g", [value_info(n, a.dtype) for n, a in feeds],
        [value_info(n, d) for n, d in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString(), {n: a for n, a in feeds}


def add_model(shape=(2, 3), dtype=np.float32, inputs=("x", "y"), output="z", graph_inputs=None,
              node_name=None, ir_version=None, serialize=True):
    """output = inputs[0] + inputs[1], every value of `shape` (None: unknown rank) and dtype.
    graph_inputs: the inputs declared in the graph (default both; a test adds the rest as
    initializers); ir_version: make_model's. Serialized unless serialize=False."""
    shape = None if shape is None else list(shape)
    kw = {} if node_name is None else {"name": node_name}
    node = helper.make_node("Add", list(inputs), [output], **kw)
    declared = inputs if graph_inputs is None else graph_inputs
    model = make_model([node], [(n, dtype, shape) for n in declared], [(output, dtype, shape)],
                       ir_version=ir_version)
    return model_bytes(model) if serialize else model


def identity_model(dtype=np.float32, shape=(2, 3)):
    """y = Identity(x), serialized."""
    shape = None if shape is None else list(shape)
    node = helper.make_node("Identity", ["x"], ["y"])
    return model_bytes(make_model([node], [("x", dtype, shape)], [("y", dtype, shape)]))


# --- subprocesses -----------------------------------------------------------------------------


def subprocess_env(keep_pythonpath=True, **extra):
    """os.environ (plus extra) with PYTHONPATH = ORTLITE_TEST_PATH (a sanitizer build), the
    repository root and, when keep_pythonpath, the PYTHONPATH already set."""
    env = dict(os.environ, **extra)
    parts = [os.environ.get("ORTLITE_TEST_PATH"), ROOT]
    if keep_pythonpath:
        parts.append(env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
    return env


def optimized_session(model, level=None):
    """A 1-thread ortlite session of a ModelProto at `level` (default ORT_ENABLE_ALL)."""
    so = ortlite.SessionOptions()
    so.graph_optimization_level = (ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL
                                   if level is None else level)
    so.intra_op_num_threads = 1
    return ortlite.InferenceSession(model.SerializeToString(), so)


def node_ops(s):
    """The op type of each node a session runs, in order (from its node placement)."""
    return [label.split(" node")[0] for label, _ in s._node_placement()]


def ort_u8s8_saturates():
    """Whether onnxruntime's u8 x s8 integer products saturate on this CPU. Without VNNI its
    kernels add pairs of u8 x s8 products in saturating int16 (pmaddubsw), so 255 * 127 +
    255 * 127 comes back as 32767 instead of 64770: there the oracle is exact only while
    int8 weights stay within I8_SAFE_RANGE (onnxruntime's reduce_range)."""
    import sys

    tools = os.path.join(ROOT, "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import tool_models

    return tool_models.ort_u8s8_saturates()


# int8 values where no pair of u8 x s8 products can saturate int16 (2 * 255 * 64 < 32768).
I8_SAFE_RANGE = (-64, 63)


def int8_range():
    """(lo, hi) for int8 weights compared with onnxruntime: the full range where its
    products are exact, I8_SAFE_RANGE where they saturate (ort_u8s8_saturates)."""
    return I8_SAFE_RANGE if ort_u8s8_saturates() else (-128, 127)


# One-node unary models (the op from each key's prefix, the element type from the array's)
# run in a fresh process per instruction set (ORTLITE_FAST_ISA), on each whole array and on
# its slices of 1 to 39 elements: {isa: {key: output}} for comparing the ISA paths' bits.
_UNARY_ISA_SCRIPT = r"""
import sys
import numpy as np
import ortlite
from onnx import helper
from onnx.helper import np_dtype_to_tensor_dtype

data = dict(np.load(sys.argv[1]))
out = {}
for key, x in data.items():
    op = key.split("_")[0]
    t = np_dtype_to_tensor_dtype(x.dtype)
    node = helper.make_node(op, ["x"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", t, None)],
                          [helper.make_tensor_value_info("y", t, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    s = ortlite.InferenceSession(m.SerializeToString())
    out[key] = s.run(None, {"x": x})[0]
    for n in range(1, 40):
        out[f"{key}_{n}"] = s.run(None, {"x": x[3:3 + n]})[0]
np.savez(sys.argv[2], **out)
"""


def unary_outputs_per_isa(feeds, tmp_path, isas=("sse2", "avx2", "avx512")):
    import subprocess
    import sys

    np.savez(tmp_path / "in.npz", **feeds)
    outs = {}
    for isa in isas:
        r = subprocess.run([sys.executable, "-c", _UNARY_ISA_SCRIPT, str(tmp_path / "in.npz"),
                            str(tmp_path / f"{isa}.npz")],
                           env=dict(os.environ, ORTLITE_FAST_ISA=isa), capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        outs[isa] = np.load(tmp_path / f"{isa}.npz")
    return outs
