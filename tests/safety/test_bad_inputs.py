"""Bad-input corpus: thousands of malformed models, each loaded (and, when it loads, run
once with zero-filled inputs) in a child Python process, so that a crash, a hang or a
runaway allocation fails a test instead of killing pytest.

Every case must end in a typed ortlite error (an ortlite.OrtliteError subclass) or a
correct result; when ortlite runs a case and onnxruntime runs it too, the outputs must
agree. The children run under RLIMIT_AS (CHILD_AS_LIMIT): an unbounded allocation shows as
a failed case, never as a machine out of memory, and each child's peak RSS is checked
against PEAK_RSS_LIMIT so that no case comes near the limit.

Cases (see docs/fuzzing.md): truncations at 16 points, 1,000 seeded byte mutations,
dims (negative, huge, overflowing), raw_data size mismatches, bad data_type enums,
attributes of the wrong type, bad graphs (cycles, dangling inputs, duplicate names),
10,000-deep nesting, external-data paths that leave the model's directory, and the
fuzzer's crash reproducers in tests/data/fuzz/. tests/api/test_model_errors.py checks the
exact error class and message of single cases in-process; this file goes broad.
"""

import json
import os
import pickle
import select
import subprocess
import sys
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import DATA, ROOT
from helpers import pb_encode as pb

sys.path.insert(0, os.path.join(ROOT, "tools", "fuzz"))
import make_corpus  # noqa: E402

FUZZ_DATA = os.path.join(DATA, "fuzz")
CHILD_AS_LIMIT = 2 << 30        # RLIMIT_AS of each child: 2 GiB
PEAK_RSS_LIMIT = 1 << 30        # no child may come near it
CASE_TIMEOUT = 20.0             # seconds per case (a hang is a failure)
MAX_FEED_BYTES = 1 << 20

# Cases known to fail, by id: reason. Each is xfail(strict=True) in test_known_failures.
KNOWN = {}

CHILD = r'''
import json, os, pickle, resource, sys
limit = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import numpy as np
sys.path.insert(0, sys.argv[4])
import ortlite
try:
    import onnxruntime
except Exception:
    onnxruntime = None

MAX_FEED = int(sys.argv[5])
NP = {"float": np.float32, "double": np.float64, "float16": np.float16, "int8": np.int8,
      "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
      "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "bool": np.bool_,
      "string": object}

def emit(*a):
    sys.stdout.write(json.dumps(a) + "\n")
    sys.stdout.flush()

def zero_feeds(inputs):
    feeds, total = {}, 0
    for i in inputs:
        t = i.type
        if not (t.startswith("tensor(") and t[7:-1] in NP):
            return None
        shape = i.shape if i.shape is not None else []
        dims = []
        for d in shape:
            d = d if isinstance(d, int) else 1
            if d < 0 or d > MAX_FEED:
                return None
            dims.append(d)
        dt = np.dtype(NP[t[7:-1]])
        n = int(np.prod(dims, dtype=object)) if dims else 1
        total += n * max(dt.itemsize, 8)
        if total > MAX_FEED:
            return None
        a = np.zeros(dims, dt)
        if dt == object:
            a[...] = ""
        feeds[i.name] = a
    return feeds

def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return "shape/dtype %s %s vs onnxruntime %s %s" % (a.shape, a.dtype, b.shape, b.dtype)
    if a.dtype.kind in "fc":
        ok = np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-3, atol=1e-4, equal_nan=True)
    else:
        ok = np.array_equal(a, b)
    return None if ok else "values differ"

def run_case(idx, c):
    src = c["path"] if "path" in c else c["bytes"]
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = 1
    try:
        sess = ortlite.InferenceSession(src, so)
    except ortlite.OrtliteError as e:
        return ["error", type(e).__name__, str(e)[:300]]
    except BaseException as e:
        return ["bad", type(e).__name__, str(e)[:300]]
    try:
        feeds = zero_feeds(sess.get_inputs())
    except BaseException as e:
        return ["bad", type(e).__name__, "get_inputs: " + str(e)[:300]]
    if feeds is None:
        return ["loaded"]
    try:
        outs = sess.run(None, feeds)
    except ortlite.OrtliteError as e:
        return ["error", type(e).__name__, "run: " + str(e)[:300]]
    except BaseException as e:
        return ["bad", type(e).__name__, "run: " + str(e)[:300]]
    if onnxruntime is None or not c.get("compare", True):
        return ["ok"]
    emit("ort", idx)
    try:
        o = onnxruntime.SessionOptions()
        o.intra_op_num_threads = 1
        o.inter_op_num_threads = 1
        rs = onnxruntime.InferenceSession(src, o, providers=["CPUExecutionProvider"])
        ref = rs.run(None, feeds)
    except BaseException:
        return ["ok", "onnxruntime refuses it"]
    if len(ref) != len(outs):
        return ["mismatch", "%d outputs vs onnxruntime %d" % (len(outs), len(ref))]
    for k, (a, b) in enumerate(zip(outs, ref)):
        d = same(a, b)
        if d:
            return ["mismatch", "output %d: %s" % (k, d)]
    return ["ok", "matches onnxruntime"]

cases = pickle.load(open(sys.argv[1], "rb"))
for idx in range(int(sys.argv[2]), len(cases)):
    emit("start", idx)
    emit("end", idx, run_case(idx, cases[idx]))
# VmHWM is this process's own peak: ru_maxrss also counts the parent's resident set at
# the fork that started it (Linux carries it across exec).
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
emit("rss", int(hwm[0].split()[1]) * 1024 if hwm else
     resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
'''


def run_cases(cases, workdir):
    """Runs the cases in child processes; returns ({id: outcome}, [peak RSS per child]).
    A child that dies or hangs is charged to its current case and restarted after it."""
    pkl = os.path.join(workdir, "cases.pkl")
    with open(pkl, "wb") as f:
        pickle.dump(cases, f)
    results, rss = {}, []
    start = 0
    while start < len(cases):
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, pkl, str(start), str(CHILD_AS_LIMIT), ROOT,
             str(MAX_FEED_BYTES)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir)
        current, phase, buf = None, "load", b""
        deadline = time.monotonic() + 60  # imports
        hung = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                hung = True
                proc.kill()
                break
            r, _, _ = select.select([proc.stdout], [], [], left)
            if not r:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg[0] == "start":
                    current, phase = msg[1], "load"
                    deadline = time.monotonic() + CASE_TIMEOUT
                elif msg[0] == "ort":
                    phase = "ort"
                    deadline = time.monotonic() + 60
                elif msg[0] == "end":
                    results[cases[msg[1]]["id"]] = msg[2]
                    current = None
                    deadline = time.monotonic() + CASE_TIMEOUT
                elif msg[0] == "rss":
                    rss.append(msg[1])
        proc.wait()
        err = proc.stderr.read().decode(errors="replace")[-1500:]
        if current is None:
            if proc.returncode != 0 and len(results) < len(cases):
                raise AssertionError(f"bad-input child failed outside a case: {err}")
            break
        cid = cases[current]["id"]
        if phase == "ort":
            # onnxruntime, not ortlite, died on it: ortlite's own run succeeded.
            results[cid] = ["ok", "onnxruntime crashed or hung"]
        elif hung:
            results[cid] = ["hang", f"no result within {CASE_TIMEOUT} s"]
        else:
            results[cid] = ["crash", f"child exited with {proc.returncode}: {err}"]
        start = current + 1
    return results, rss


# ---------------------------------------------------------------------------------------
# Case builders. Each returns a list of {"id", "bytes" | "path", ["compare": False]}.

BASES = dict(make_corpus.models())
BASE_NAMES = ["mlp", "cnn", "attention", "function_model", "casts_and_types", "reshape_gather"]


def _ser(m):
    return m.SerializeToString()


def truncation_cases():
    out = []
    for name in BASE_NAMES:
        data = _ser(BASES[name])
        for k in range(16):
            cut = k * len(data) // 16
            out.append({"id": f"trunc/{name}/{k}", "bytes": data[:cut]})
    return out


def mutation_cases(n=1000):
    rng = np.random.default_rng(20261130)
    datas = [_ser(BASES[name]) for name in BASE_NAMES]
    out = []
    for i in range(n):
        d = bytearray(datas[i % len(datas)])
        for _ in range(int(rng.integers(1, 6))):
            op = int(rng.integers(0, 6))
            p = int(rng.integers(0, len(d)))
            if op == 0:
                d[p] = int(rng.integers(0, 256))
            elif op == 1:
                d[p] ^= 1 << int(rng.integers(0, 8))
            elif op == 2:
                d[p:p] = bytes(rng.integers(0, 256, int(rng.integers(1, 8)), dtype=np.uint8))
            elif op == 3:
                del d[p:p + int(rng.integers(1, 8))]
            elif op == 4:  # a varint's continuation bits set: lengths and dims get huge
                d[p:p + 1] = b"\xff"
            else:  # duplicate a chunk (repeated fields, merged sub-messages)
                q = int(rng.integers(0, len(d)))
                d[p:p] = d[q:q + int(rng.integers(1, 64))]
        out.append({"id": f"mutate/{i}", "bytes": bytes(d)})
    return out


def _identity_of(t, out_type=TensorProto.FLOAT):
    node = helper.make_node("Identity", ["w"], ["y"])
    g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", out_type, None)],
                          initializer=[t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _tensor(name="w", data_type=TensorProto.FLOAT, dims=(), raw=None, **fields):
    t = TensorProto()
    t.name = name
    t.data_type = data_type
    t.dims.extend(dims)
    if raw is not None:
        t.raw_data = raw
    for k, v in fields.items():
        getattr(t, k).extend(v)
    return t


def _single(op, inputs, attrs=None, inits=(), in_specs=(), out_type=TensorProto.FLOAT, opset=17):
    node = helper.make_node(op, inputs, ["y"], **(attrs or {}))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in in_specs],
                          [helper.make_tensor_value_info("y", out_type, None)], initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def dims_cases():
    out = []
    for i, dims in enumerate([[-1], [-2**63], [2, -3], [0, -1], [2**62], [2**63 - 1], [2**32, 2**32],
                              [2**31, 2**31, 4], [3, 2**61], [2**21] * 3, [1] * 64 + [2**40],
                              [0, 2**63 - 1], [2**62, 0], [1] * 1000]):
        raw = b"\x00" * 16
        out.append({"id": f"dims/raw/{i}", "bytes": _ser(_identity_of(_tensor(dims=dims, raw=raw)))})
        out.append({"id": f"dims/floats/{i}",
                    "bytes": _ser(_identity_of(_tensor(dims=dims, float_data=[1.0, 2.0])))})
        out.append({"id": f"dims/strings/{i}", "bytes": _ser(_identity_of(
            _tensor(dims=dims, data_type=TensorProto.STRING, string_data=[b"a"]), TensorProto.STRING))})
    # Declared input dims: negative / huge (the session must refuse or the run must fail
    # cleanly; the child skips feeding inputs it cannot allocate).
    for i, d in enumerate([-1, -2**63, 2**62, 2**63 - 1]):
        m = _single("Relu", ["x"], in_specs=[("x", TensorProto.FLOAT, [d, 2])])
        out.append({"id": f"dims/input/{i}", "bytes": _ser(m)})
    # Shapes that reach the kernels from initializers: each must be refused cleanly.
    for i, shape in enumerate([[2**62], [2**31, 2**31], [-5], [2**40, 0, -1], [2**63 - 1, 2]]):
        sh = numpy_helper.from_array(np.array(shape, np.int64), "s")
        x1 = numpy_helper.from_array(np.ones([1], np.float32), "x")
        out.append({"id": f"dims/expand/{i}", "bytes": _ser(_single("Expand", ["x", "s"], inits=[x1, sh]))})
        out.append({"id": f"dims/cos/{i}", "bytes": _ser(_single("ConstantOfShape", ["s"], inits=[sh]))})
        out.append({"id": f"dims/reshape/{i}", "bytes": _ser(_single("Reshape", ["x", "s"], inits=[x1, sh]))})
        out.append({"id": f"dims/tile/{i}", "bytes": _ser(_single("Tile", ["x", "s"], inits=[
            numpy_helper.from_array(np.ones([1] * len(shape), np.float32), "x"), sh]))})
    for i, (st, lim, dl) in enumerate([(0, 2**62, 1), (-2**63, 2**63 - 1, 1), (0, 10, 0), (2**63 - 1, -2**63, -1)]):
        inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                 [("a", st), ("b", lim), ("c", dl)]]
        out.append({"id": f"dims/range/{i}",
                    "bytes": _ser(_single("Range", ["a", "b", "c"], inits=inits, out_type=TensorProto.INT64))})
    return out


def raw_data_cases():
    out = []
    for dt, size in [(TensorProto.FLOAT, 4), (TensorProto.DOUBLE, 8), (TensorProto.FLOAT16, 2),
                     (TensorProto.INT64, 8), (TensorProto.BOOL, 1), (TensorProto.UINT8, 1),
                     (TensorProto.BFLOAT16, 2), (TensorProto.INT32, 4)]:
        for n in sorted({0, 1, size * 6 - 1, size * 6 + 1, size * 7, size * 600}):
            t = _tensor(data_type=dt, dims=[2, 3], raw=b"\x01" * n)
            out.append({"id": f"raw/{dt}/{n}", "bytes": _ser(_identity_of(t, dt))})
    # typed-field counts that disagree with dims, for each typed field
    for field, dt in [("float_data", TensorProto.FLOAT), ("int32_data", TensorProto.INT32),
                      ("int64_data", TensorProto.INT64), ("double_data", TensorProto.DOUBLE),
                      ("uint64_data", TensorProto.UINT64), ("int32_data", TensorProto.FLOAT16),
                      ("int32_data", TensorProto.BOOL), ("string_data", TensorProto.STRING)]:
        for count in [0, 5, 7, 100]:
            vals = [b"s"] * count if field == "string_data" else [1] * count
            t = _tensor(data_type=dt, dims=[2, 3], **{field: vals})
            out.append({"id": f"typed/{field}/{dt}/{count}", "bytes": _ser(_identity_of(t, dt))})
    # a string tensor given raw_data; float given both raw_data and float_data
    out.append({"id": "raw/string_raw", "bytes": _ser(_identity_of(
        _tensor(data_type=TensorProto.STRING, dims=[2], raw=b"abcd"), TensorProto.STRING))})
    out.append({"id": "raw/both", "bytes": _ser(_identity_of(
        _tensor(dims=[2], raw=b"\x00" * 8, float_data=[1.0, 2.0])))})
    return out


def data_type_cases():
    out = []
    for dt in [0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 99, 2**31 - 1, -1, -2**31, 2**40]:
        t = TensorProto()
        t.name = "w"
        t.dims.extend([2])
        t.raw_data = b"\x00" * 16
        # data_type is int32 in the schema; encode out-of-range values by hand
        body = t.SerializeToString() + pb.vint(pb.T_DATA_TYPE, dt)
        m = _identity_of(_tensor(dims=[2], raw=b"\x00" * 8))
        m.graph.ClearField("initializer")
        out.append({"id": f"dtype/init/{dt}",
                    "bytes": pb.append_to_graph(_ser(m), pb.ln(pb.G_INITIALIZER, body))})
        # graph input and Cast 'to' with the bad enum
        if -2**31 <= dt < 2**31:
            m = _single("Cast", ["x"], attrs={"to": dt}, in_specs=[("x", TensorProto.FLOAT, [2])])
            out.append({"id": f"dtype/cast_to/{dt}", "bytes": _ser(m)})
            m = _single("Relu", ["x"], in_specs=[("x", dt, [2])])
            out.append({"id": f"dtype/input/{dt}", "bytes": _ser(m)})
            m = _single("ConstantOfShape", ["s"], attrs={"value": helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])},
                        inits=[numpy_helper.from_array(np.array([2], np.int64), "s")])
            m.graph.node[0].attribute[0].t.data_type = dt
            out.append({"id": f"dtype/attr_tensor/{dt}", "bytes": _ser(m)})
    return out


def attribute_cases():
    """Attributes with the wrong type, kind or value, on ops of several families."""
    F = TensorProto.FLOAT
    x4 = [("x", F, [1, 2, 4, 4])]
    x2 = [("x", F, [2, 3])]
    w = numpy_helper.from_array(np.ones([2, 2, 3, 3], np.float32), "w")
    t1 = helper.make_tensor("t", F, [1], [1.0])
    g = helper.make_graph([], "sub", [], [])
    specs = [
        ("Conv", ["x", "w"], x4, [w], [("kernel_shape", 2.0), ("kernel_shape", "3"), ("strides", t1),
                                       ("pads", [1.0, 1.0]), ("group", [1, 2]), ("dilations", g),
                                       ("kernel_shape", [3, 3, 3, 3, 3]), ("group", 0), ("group", -1),
                                       ("strides", [0, 0]), ("pads", [-5, -5, -5, -5]), ("dilations", [2**62, 1])]),
        ("MaxPool", ["x"], x4, [], [("kernel_shape", "2"), ("kernel_shape", [0, 0]), ("kernel_shape", [2**40, 2]),
                                    ("strides", [-1, -1]), ("pads", [1, 1]), ("ceil_mode", 1.5)]),
        ("Gemm", ["x", "x"], x2, [], [("alpha", [1.0, 2.0]), ("transA", "yes"), ("transB", 2.5),
                                      ("beta", t1)]),
        ("Transpose", ["x"], x2, [], [("perm", "10"), ("perm", [1.0, 0.0]), ("perm", [0, 0]),
                                      ("perm", [2**62, 0]), ("perm", [-1, 0]), ("perm", [0])]),
        ("Softmax", ["x"], x2, [], [("axis", 1.0), ("axis", "1"), ("axis", 2**62), ("axis", -2**63)]),
        ("Cast", ["x"], x2, [], [("to", 1.0), ("to", "float"), ("to", [1]), ("to", g)]),
        ("Concat", ["x", "x"], x2, [], [("axis", [0]), ("axis", 5), ("axis", -2**63)]),
        ("Gather", ["x", "x"], x2, [], [("axis", t1)]),
        ("LeakyRelu", ["x"], x2, [], [("alpha", "0.1"), ("alpha", [0.1, 0.2]), ("alpha", 3)]),
        ("Flatten", ["x"], x2, [], [("axis", 2**40), ("axis", "x")]),
        ("ReduceSum", ["x"], x2, [], [("keepdims", "1"), ("noop_with_empty_axes", [1])]),
        ("Split", ["x"], x2, [], [("axis", 9), ("num_outputs", -1)]),
        ("Constant", [], [], [], [("value", 1), ("value", "x"), ("value_float", [1.0]), ("value_ints", t1),
                                  ("value_int", 2.0), ("sparse_value", t1), ("value_strings", 3)]),
        ("LayerNormalization", ["x", "x"], x2, [], [("axis", 2**62), ("epsilon", "e")]),
        ("ArgMax", ["x"], x2, [], [("axis", -2**62), ("keepdims", 2.0)]),
    ]
    out = []
    for op, ins, in_specs, inits, attrs in specs:
        for j, (name, value) in enumerate(attrs):
            m = _single(op, ins, attrs={name: value}, inits=inits, in_specs=in_specs,
                        opset=18 if op == "Split" else 17)
            out.append({"id": f"attr/{op}/{j}", "bytes": _ser(m)})
            # the same attribute with its declared type disagreeing with the field set
            a = m.graph.node[0].attribute[0]
            for at in [0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 13, 14]:
                if at == a.type:
                    continue
                a2 = m.__class__()
                a2.CopyFrom(m)
                a2.graph.node[0].attribute[0].type = at
                out.append({"id": f"attr/{op}/{j}/type{at}", "bytes": _ser(a2), "compare": False})
    return out


def graph_cases():
    F = TensorProto.FLOAT
    n = helper.make_node
    vi = helper.make_tensor_value_info

    def model(nodes, ins=("x",), outs=("y",), inits=(), functions=(), opsets=(("", 17),)):
        g = helper.make_graph(nodes, "g", [vi(i, F, [2]) for i in ins], [vi(o, F, None) for o in outs],
                              initializer=list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                              functions=list(functions))
        m.ir_version = 8
        return _ser(m)

    one = numpy_helper.from_array(np.ones(2, np.float32), "one")
    cases = {
        "cycle2": model([n("Relu", ["b"], ["a"]), n("Relu", ["a"], ["b"]), n("Add", ["x", "a"], ["y"])]),
        "self_loop": model([n("Add", ["x", "y"], ["y"])]),
        "cycle_long": model([n("Relu", [f"v{(i + 1) % 50}"], [f"v{i}"]) for i in range(50)] +
                            [n("Add", ["x", "v0"], ["y"])]),
        "cycle_unused": model([n("Relu", ["x"], ["y"]), n("Relu", ["q"], ["p"]), n("Relu", ["p"], ["q"])]),
        "dangling_input": model([n("Add", ["x", "nowhere"], ["y"])]),
        "dangling_output": model([n("Relu", ["x"], ["t"])]),
        "dangling_deep": model([n("Relu", ["x"], ["a"]), n("Add", ["a", "ghost"], ["b"]), n("Relu", ["b"], ["y"])]),
        "dup_output": model([n("Relu", ["x"], ["y"]), n("Neg", ["x"], ["y"])]),
        "dup_output_of_input": model([n("Relu", ["x"], ["x"]), n("Relu", ["x"], ["y"])]),
        "dup_output_of_init": model([n("Relu", ["x"], ["one"]), n("Add", ["x", "one"], ["y"])], inits=[one]),
        "dup_graph_input": model([n("Add", ["x", "x"], ["y"])], ins=("x", "x")),
        "dup_graph_output": model([n("Relu", ["x"], ["y"])], outs=("y", "y")),
        "dup_init": model([n("Add", ["x", "one"], ["y"])], inits=[one, one]),
        "dup_node_names": model([n("Relu", ["x"], ["a"], name="n"), n("Relu", ["a"], ["y"], name="n")]),
        "empty_name_output": model([n("Relu", ["x"], [""]), n("Relu", ["x"], ["y"])]),
        "empty_name_input": model([n("Add", ["x", ""], ["y"])]),
        "output_is_input": model([], outs=("x",)),
        "no_nodes_missing_output": model([], outs=("y",)),
        "unknown_op": model([n("NoSuchOp", ["x"], ["y"])]),
        "unknown_domain": model([n("Relu", ["x"], ["y"], domain="no.such")]),
        "opset_0": model([n("Relu", ["x"], ["y"])], opsets=(("", 0),)),
        "opset_huge": model([n("Relu", ["x"], ["y"])], opsets=(("", 2**62),)),
        "opset_negative": model([n("Relu", ["x"], ["y"])], opsets=(("", -1),)),
        "no_opset": model([n("Relu", ["x"], ["y"])], opsets=()),
        "too_many_inputs": model([n("Relu", ["x", "x", "x"], ["y"])]),
        "too_many_outputs": model([n("Relu", ["x"], ["y", "z", "w"])]),
        "no_inputs": model([n("Add", [], ["y"])]),
    }
    # functions: recursive, mutually recursive, wrong arity, missing body ops, dup names
    def fn(name, body, ins=("a",), outs=("o",), opsets=(("", 17),)):
        return helper.make_function("local", name, list(ins), list(outs), body,
                                    [helper.make_opsetid(d, v) for d, v in opsets])
    loc = (("", 17), ("local", 1))
    cases["fn_recursive"] = model([n("F", ["x"], ["y"], domain="local")], opsets=loc,
                                  functions=[fn("F", [n("F", ["a"], ["o"], domain="local")])])
    cases["fn_mutual"] = model([n("F", ["x"], ["y"], domain="local")], opsets=loc,
                               functions=[fn("F", [n("G", ["a"], ["o"], domain="local")]),
                                          fn("G", [n("F", ["a"], ["o"], domain="local")])])
    cases["fn_arity"] = model([n("F", ["x", "x", "x"], ["y", "z"], domain="local")], opsets=loc,
                              functions=[fn("F", [n("Relu", ["a"], ["o"])])])
    cases["fn_dangling"] = model([n("F", ["x"], ["y"], domain="local")], opsets=loc,
                                 functions=[fn("F", [n("Add", ["a", "zz"], ["o"])])])
    cases["fn_output_unset"] = model([n("F", ["x"], ["y"], domain="local")], opsets=loc,
                                     functions=[fn("F", [n("Relu", ["a"], ["t"])])])
    cases["fn_dup"] = model([n("F", ["x"], ["y"], domain="local")], opsets=loc,
                            functions=[fn("F", [n("Relu", ["a"], ["o"])]), fn("F", [n("Neg", ["a"], ["o"])])])
    cases["fn_cycle"] = model([n("F", ["x"], ["y"], domain="local")], opsets=loc,
                              functions=[fn("F", [n("Add", ["a", "q"], ["p"]), n("Relu", ["p"], ["q"]),
                                                  n("Relu", ["p"], ["o"])])])
    chain = [n("Relu", ["x"], ["c0"])] + [n("Relu", [f"c{i}"], [f"c{i + 1}"]) for i in range(9999)] + \
        [n("Identity", ["c9999"], ["y"])]
    cases["long_chain_10000"] = model(chain)
    # 100,000 nested function calls is not expressible; a 500-deep chain of functions is.
    fns = [fn(f"F{i}", [n(f"F{i + 1}", ["a"], ["o"], domain="local")]) for i in range(500)] + \
        [fn("F500", [n("Relu", ["a"], ["o"])])]
    cases["fn_chain_500"] = model([n("F0", ["x"], ["y"], domain="local")], opsets=loc, functions=fns)
    return [{"id": f"graph/{k}", "bytes": v} for k, v in cases.items()]


def _nest(levels, prefix_for):
    """Hand-encodes `levels` nested messages, inside out, in O(total size): prefix_for(L)
    returns the bytes that precede an inner message of length L."""
    inner = pb.ln(1, pb.ln(4, "Identity") + pb.ln(1, "c") + pb.ln(2, "o"))  # GraphProto
    parts, size = [inner], len(inner)
    for _ in range(levels):
        p = prefix_for(size)
        parts.append(p)
        size += len(p)
    return b"".join(reversed(parts))


def _graph_attr_prefix(attr_name, field, attr_type, op):
    def prefix(inner_len):
        a0 = pb.ln(1, attr_name) + pb.vint(20, attr_type)
        attr_len = len(a0) + len(pb.key(field, 2) + pb.varint(inner_len)) + inner_len
        n0 = pb.ln(1, "c") + pb.ln(2, "o") + pb.ln(4, op)
        node_len = len(n0) + len(pb.key(5, 2) + pb.varint(attr_len)) + attr_len
        # GraphProto{node{..., attribute{name, type, g|graphs: <inner>}}}
        return (pb.key(1, 2) + pb.varint(node_len) + n0 + pb.key(5, 2) + pb.varint(attr_len) + a0 +
                pb.key(field, 2) + pb.varint(inner_len))
    return prefix


def nesting_cases(levels=10000):
    head = pb.vint(1, 8) + pb.ln(8, pb.vint(2, 17))
    out = []
    for name, field, at, op in [("then_branch", 6, 5, "If"), ("body", 6, 5, "Loop"),
                                ("branches", 11, 10, "If")]:
        g = _nest(levels, _graph_attr_prefix(name, field, at, op))
        out.append({"id": f"nest/{op}_{field}", "bytes": head + pb.key(pb.M_GRAPH, 2) + pb.varint(len(g)) + g})
    base = _ser(BASES["mlp"])
    # TypeProto seq(seq(...)) / optional(...) / map(..., ...) 10,000 deep in a value_info
    for kind, wrap in [("seq", lambda L: pb.key(4, 2) + pb.varint(L + len(pb.key(1, 2) + pb.varint(L))) +
                        pb.key(1, 2) + pb.varint(L)),
                       ("optional", lambda L: pb.key(9, 2) + pb.varint(L + len(pb.key(1, 2) + pb.varint(L))) +
                        pb.key(1, 2) + pb.varint(L))]:
        t = pb.ln(1, pb.vint(1, 1))
        parts, size = [t], len(t)
        for _ in range(levels):
            p = wrap(size)
            parts.append(p)
            size += len(p)
        t = b"".join(reversed(parts))
        out.append({"id": f"nest/type_{kind}",
                    "bytes": pb.append_to_graph(base, pb.ln(13, pb.ln(1, "v") + pb.ln(2, t)))})
    # unknown-field groups and unknown sub-messages 100,000 deep
    out.append({"id": "nest/groups", "bytes": base + pb.key(1000, 3) * 100000 + pb.key(1000, 4) * 100000})
    # 10,000 levels of a length-delimited unknown field holding itself
    parts, size = [b""], 0
    for _ in range(levels):
        p = pb.key(1000, 2) + pb.varint(size)
        parts.append(p)
        size += len(p)
    out.append({"id": "nest/unknown_ld", "bytes": base + b"".join(reversed(parts))})
    # 200,000 empty repeated sub-messages (breadth, not depth)
    out.append({"id": "nest/wide_nodes", "bytes": pb.append_to_graph(base, pb.ln(1, b"") * 200000)})
    return out


def external_cases(root):
    """Models in root/m/ whose initializer lives in external data; files outside m/ must
    never be read."""
    mdir = os.path.join(root, "m")
    os.makedirs(os.path.join(mdir, "sub"), exist_ok=True)
    vals = np.arange(6, dtype=np.float32)
    for p in [os.path.join(root, "outside.bin"), os.path.join(mdir, "w.bin"),
              os.path.join(mdir, "sub", "w.bin")]:
        with open(p, "wb") as f:
            f.write(vals.tobytes())
    links = {"link_out.bin": os.path.join(root, "outside.bin"), "link_in.bin": "w.bin",
             "link_dir": root, "link_abs_in.bin": os.path.join(mdir, "w.bin"),
             "link_loop.bin": "link_loop.bin", "link_dangling.bin": "nowhere.bin"}
    for name, target in links.items():
        p = os.path.join(mdir, name)
        if not os.path.lexists(p):
            os.symlink(target, p)
    fifo = os.path.join(mdir, "fifo.bin")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)

    def model_with(entries, name):
        t = TensorProto()
        t.name = "w"
        t.data_type = TensorProto.FLOAT
        t.dims.extend([2, 3])
        t.data_location = TensorProto.EXTERNAL
        for k, v in entries:
            e = t.external_data.add()
            e.key, e.value = k, v
        m = _identity_of(t)
        path = os.path.join(mdir, name + ".onnx")
        with open(path, "wb") as f:
            f.write(_ser(m))
        return path

    specs = {
        "ok": [("location", "w.bin")],
        "ok_sub": [("location", "sub/w.bin")],
        "ok_offset": [("location", "w.bin"), ("offset", "0"), ("length", "24")],
        "ok_link_in": [("location", "link_in.bin")],
        "ok_link_abs_in": [("location", "link_abs_in.bin")],
        "dotdot": [("location", "../outside.bin")],
        "dotdot_sub": [("location", "sub/../../outside.bin")],
        "dotdot_inner": [("location", "sub/../w.bin")],
        "absolute": [("location", os.path.join(root, "outside.bin"))],
        "absolute_in": [("location", os.path.join(mdir, "w.bin"))],
        "absolute_etc": [("location", "/etc/passwd")],
        "dev_zero": [("location", "/dev/zero")],
        "symlink_out": [("location", "link_out.bin")],
        "symlink_dir": [("location", "link_dir/outside.bin")],
        "symlink_loop": [("location", "link_loop.bin")],
        "symlink_dangling": [("location", "link_dangling.bin")],
        "fifo": [("location", "fifo.bin")],
        "directory": [("location", "sub")],
        "dot": [("location", ".")],
        "empty": [("location", "")],
        "missing": [("location", "nope.bin")],
        "no_location": [("offset", "0")],
        "nul": [("location", "w.bin\x00../outside.bin")],
        "backslash": [("location", "..\\outside.bin")],
        "offset_past_end": [("location", "w.bin"), ("offset", "4096")],
        "offset_negative": [("location", "w.bin"), ("offset", "-8")],
        "offset_text": [("location", "w.bin"), ("offset", "abc")],
        "offset_huge": [("location", "w.bin"), ("offset", "18446744073709551615")],
        "offset_overflow": [("location", "w.bin"), ("offset", "99999999999999999999999")],
        "length_short": [("location", "w.bin"), ("length", "8")],
        "length_long": [("location", "w.bin"), ("length", "4096")],
        "length_huge": [("location", "w.bin"), ("offset", "8"), ("length", "18446744073709551608")],
        "dup_keys": [("location", "w.bin"), ("location", "../outside.bin")],
    }
    out = [{"id": f"external/{k}", "path": model_with(v, k)} for k, v in specs.items()]
    # bytes (no directory): external data is refused
    with open(os.path.join(mdir, "ok.onnx"), "rb") as f:
        out.append({"id": "external/from_bytes", "bytes": f.read()})
    # the model path itself is a FIFO / a directory / a symlink loop
    out.append({"id": "external/model_is_fifo", "path": fifo, "compare": False})
    out.append({"id": "external/model_is_dir", "path": mdir, "compare": False})
    out.append({"id": "external/model_is_loop", "path": os.path.join(mdir, "link_loop.bin"), "compare": False})
    return out


def reproducer_cases():
    out = []
    if os.path.isdir(FUZZ_DATA):
        for name in sorted(os.listdir(FUZZ_DATA)):
            with open(os.path.join(FUZZ_DATA, name), "rb") as f:
                out.append({"id": f"fuzz/{name}", "bytes": f.read()})
    return out


CATEGORIES = {
    "trunc": truncation_cases, "mutate": mutation_cases, "dims": dims_cases, "raw": raw_data_cases,
    "dtype": data_type_cases, "attr": attribute_cases, "graph": graph_cases, "nest": nesting_cases,
    "fuzz": reproducer_cases,
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("bad_inputs"))
    cases = []
    for build in CATEGORIES.values():
        cases += build()
    cases += external_cases(root)
    assert len({c["id"] for c in cases}) == len(cases)
    results, rss = run_cases(cases, root)
    assert len(results) == len(cases)
    return cases, results, rss


def _acceptable(outcome):
    return outcome[0] in ("error", "ok", "loaded")


def _check(outcomes, prefix):
    cases, results, _ = outcomes
    ids = [c["id"] for c in cases if c["id"].split("/")[0] == prefix]
    bad = [f"{i}: {results[i]}" for i in ids if not _acceptable(results[i]) and i not in KNOWN]
    assert not bad, f"{len(bad)} of {len(ids)} cases failed:\n" + "\n".join(bad[:20])
    return {i: results[i] for i in ids}


def test_truncated_models(outcomes):
    res = _check(outcomes, "trunc")
    assert sum(r[0] == "error" for r in res.values()) >= len(res) // 2


def test_random_mutations(outcomes):
    res = _check(outcomes, "mutate")
    assert len(res) == 1000
    kinds = {r[0] for r in res.values()}
    assert "error" in kinds and "ok" in kinds  # the mutations reach both outcomes


def test_bad_dims(outcomes):
    res = _check(outcomes, "dims")
    # huge or negative initializer dims never load
    for i in range(14):
        for kind in ("raw", "floats", "strings"):
            r = res[f"dims/{kind}/{i}"]
            if i < 13:
                assert r[0] == "error", (kind, i, r)


def test_raw_data_size_mismatch(outcomes):
    res = _check(outcomes, "raw")
    for k, r in res.items():
        parts = k.split("/")
        if len(parts) == 3 and parts[2].isdigit():
            dt, n = int(parts[1]), int(parts[2])
            size = {1: 4, 11: 8, 10: 2, 7: 8, 9: 1, 2: 1, 16: 2, 6: 4}[dt]
            if n != 6 * size:
                assert r[0] == "error", (k, r)


def test_typed_field_count_mismatch(outcomes):
    _check(outcomes, "typed")


def test_bad_data_type_enums(outcomes):
    res = _check(outcomes, "dtype")
    for k, r in res.items():
        if k.startswith("dtype/init/"):
            assert r[0] == "error", (k, r)


def test_attributes_of_the_wrong_type(outcomes):
    _check(outcomes, "attr")


def test_bad_graphs(outcomes):
    res = _check(outcomes, "graph")
    for k in ["cycle2", "self_loop", "cycle_long", "dangling_input", "dangling_output", "dangling_deep",
              "dup_output", "dup_output_of_input", "fn_recursive", "fn_mutual", "fn_dangling", "fn_cycle"]:
        assert res[f"graph/{k}"][0] == "error", (k, res[f"graph/{k}"])
    assert res["graph/long_chain_10000"][0] == "ok", res["graph/long_chain_10000"]


def test_deep_nesting(outcomes):
    res = _check(outcomes, "nest")
    for k in ["nest/If_6", "nest/Loop_6", "nest/If_11", "nest/type_seq", "nest/type_optional", "nest/groups"]:
        assert res[k][0] == "error", (k, res[k])


def test_external_data_paths(outcomes):
    res = _check(outcomes, "external")
    # "sub/../w.bin" stays inside but ortlite refuses every ".." component: either is fine.
    for k in ["ok", "ok_sub", "ok_offset", "ok_link_in", "ok_link_abs_in"]:
        assert res[f"external/{k}"][0] == "ok", (k, res[f"external/{k}"])
    for k in ["dotdot", "dotdot_sub", "absolute", "absolute_etc", "dev_zero", "symlink_out",
              "symlink_dir", "symlink_loop", "symlink_dangling", "fifo", "directory", "dot", "empty",
              "missing", "nul", "offset_past_end", "offset_negative", "offset_text", "offset_huge",
              "offset_overflow", "length_short", "length_long", "length_huge", "from_bytes",
              "model_is_fifo", "model_is_dir", "model_is_loop"]:
        assert res[f"external/{k}"][0] == "error", (k, res[f"external/{k}"])


def test_fuzz_reproducers(outcomes):
    _check(outcomes, "fuzz")


@pytest.mark.parametrize("case_id", [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=v))
                                     for k, v in sorted(KNOWN.items())] or
                         [pytest.param(None, marks=pytest.mark.skip(reason="no known failures"))])
def test_known_failures(outcomes, case_id):
    _, results, _ = outcomes
    assert _acceptable(results[case_id]), results[case_id]


def test_memory_stays_bounded(outcomes):
    _, _, rss = outcomes
    assert rss and max(rss) < PEAK_RSS_LIMIT, [r >> 20 for r in rss]
