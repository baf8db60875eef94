"""ONNX node conformance: runs every node test case that the pinned onnx wheel ships
(onnx/backend/test/data/node/*) through ortlite.InferenceSession and compares the outputs
the way onnx's own backend test runner does (same shape, same dtype,
np.testing.assert_allclose with the case's rtol/atol: 1e-3/1e-7 unless the case's
data.json says otherwise).

usage: python tools/conformance.py [--update] [--workers N] [--timeout S] [--failures]
                                   [-k SUBSTRING]
  prints totals and a by-operator table;
  --update    rewrites tests/onnx_node_pass.txt (the allow-list tests/ops/test_onnx_node.py
              checks) and docs/conformance.md;
  --failures  also prints each failing case with its reason;
  -k S        runs only the cases whose name contains S (no --update then).
Progress goes to stderr: a tqdm bar on a terminal when tqdm is installed, else a few lines.

Every case runs in a child process (`--worker` mode, a few of them at once). A child that
dies (a crash) or does not answer within the timeout is killed; its case is recorded as
failed (crash / timeout) and a fresh child takes the next case, so one bad case never ends
the run. tests/ops/test_onnx_node.py imports this module.
"""

import collections
import datetime
import json
import os
import re
import select
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASS_LIST = os.path.join(ROOT, "tests", "onnx_node_pass.txt")
DOC = os.path.join(ROOT, "docs", "conformance.md")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
DEFAULT_RTOL = 1e-3  # onnx.backend.test.loader's defaults
DEFAULT_ATOL = 1e-7


def node_dir():
    """The node test data of the installed onnx wheel (found without importing onnx)."""
    import importlib.util

    spec = importlib.util.find_spec("onnx")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("onnx is not installed")
    return os.path.join(list(spec.submodule_search_locations)[0], "backend", "test", "data",
                        "node")


def list_cases():
    d = node_dir()
    return sorted(n for n in os.listdir(d)
                  if os.path.isfile(os.path.join(d, n, "model.onnx")))


# --------------------------------------------------------------------------------------
# Child side: runs cases named on stdin, answers one JSON line per case.


def _tolerances(case_dir):
    rtol, atol = DEFAULT_RTOL, DEFAULT_ATOL
    path = os.path.join(case_dir, "data.json")
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
        rtol = data.get("rtol", rtol)
        atol = data.get("atol", atol)
    return rtol, atol


def _case_operator(name, model):
    """The operator a case tests: the op_type of its node; for an `*_expanded` case, the
    operator of the case it expands; for another multi-node case, the node op_type that the
    case name starts with, else the last node's op_type."""
    m = re.search(r"_expanded(_ver\d+)?$", name)
    path = m and os.path.join(node_dir(), name[: m.start()], "model.onnx")
    if path and os.path.exists(path):
        import onnx

        return _case_operator(name[: m.start()], onnx.load(path))
    ops = [n.op_type for n in model.graph.node]
    if not ops:
        return "(none)"
    if len(set(ops)) == 1:
        return ops[0]
    base = name[len("test_"):].replace("_", "").lower()
    best = None
    for op in ops:
        if base.startswith(op.lower()) and (best is None or len(op) > len(best)):
            best = op
    return best or ops[-1]


def _compare(got, ref, rtol, atol, what):
    import numpy as np

    if ref is None:
        if got is not None:
            raise AssertionError(f"{what}: {type(got).__name__}, expected None")
        return
    if isinstance(ref, list):
        if not isinstance(got, list):
            raise AssertionError(f"{what}: {type(got).__name__}, expected a list")
        if len(got) != len(ref):
            raise AssertionError(f"{what}: {len(got)} elements, expected {len(ref)}")
        for j, (g, r) in enumerate(zip(got, ref)):
            _compare(g, r, rtol, atol, f"{what}[{j}]")
        return
    got = np.asarray(got)
    if got.shape != ref.shape:
        raise AssertionError(f"{what}: shape {got.shape}, expected {ref.shape}")
    if ref.dtype == object:
        np.testing.assert_array_equal(got, ref)
        return
    if got.dtype != ref.dtype:
        raise AssertionError(f"{what}: dtype {got.dtype}, expected {ref.dtype}")
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=what)


def run_case(name, case_dir=None):
    """Runs one case in this process; returns a dict: case, op, status ('pass' / 'fail'),
    kind (why it failed: unsupported-input, load, run, mismatch), error."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    import ortlite

    case_dir = case_dir or os.path.join(node_dir(), name)
    res = {"case": name, "op": "?", "status": "fail", "kind": "", "error": ""}
    model_path = os.path.join(case_dir, "model.onnx")
    model = onnx.load(model_path)
    res["op"] = _case_operator(name, model)
    res["ops"] = sorted({(n.domain or "") + ("::" if n.domain else "") + n.op_type
                         for n in model.graph.node})
    rtol, atol = _tolerances(case_dir)
    sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set"))
    if not sets:
        res.update(kind="no-data", error="no test_data_set directory")
        return res

    def load(path, type_proto):
        """A tensor as an array, a sequence as a list of arrays, an optional as its
        element or None: what onnxruntime's run() takes and returns."""
        which = type_proto.WhichOneof("value")
        with open(path, "rb") as f:
            data = f.read()
        if which == "tensor_type":
            return numpy_helper.to_array(onnx.load_tensor_from_string(data))
        if which == "sequence_type":
            seq = onnx.SequenceProto()
            seq.ParseFromString(data)
            return numpy_helper.to_list(seq)
        if which == "optional_type":
            opt = onnx.OptionalProto()
            opt.ParseFromString(data)
            return numpy_helper.to_optional(opt)
        raise TypeError(f"{which} value ({os.path.basename(path)})")

    try:
        sess = ortlite.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        kind = "opset" if "opset version is not supported" in str(e) else "load"
        res.update(kind=kind, error=f"{type(e).__name__}: {e}")
        return res
    for ds in sets:
        ds_dir = os.path.join(case_dir, ds)
        n_in = len([f for f in os.listdir(ds_dir) if f.startswith("input_")])
        n_out = len([f for f in os.listdir(ds_dir) if f.startswith("output_")])
        try:
            feeds = {}
            for i in range(n_in):
                vi = model.graph.input[i]
                feeds[vi.name] = load(os.path.join(ds_dir, f"input_{i}.pb"), vi.type)
            expected = [load(os.path.join(ds_dir, f"output_{i}.pb"), model.graph.output[i].type)
                        for i in range(n_out)]
        except Exception as e:  # noqa: BLE001
            res.update(kind="unsupported-input", error=f"{type(e).__name__}: {e}")
            return res
        try:
            outputs = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            res.update(kind="run", error=f"{type(e).__name__}: {e}")
            return res
        try:
            if len(outputs) != len(expected):
                raise AssertionError(f"{len(outputs)} outputs, expected {len(expected)}")
            for i, (got, ref) in enumerate(zip(outputs, expected)):
                _compare(got, ref, rtol, atol, f"output {i}")
        except Exception as e:  # noqa: BLE001
            msg = " ".join(str(e).split())
            res.update(kind="mismatch", error=f"{type(e).__name__}: {msg[:300]}")
            return res
    res.update(status="pass")
    return res


def worker_main():
    # The protocol goes over a private copy of stdout; anything printed by the native
    # code or by Python goes to stderr instead, so it cannot corrupt the answers.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        import resource

        limit = 6 << 30  # a runaway allocation fails instead of taking the machine down
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        t0 = time.perf_counter()
        try:
            res = run_case(name)
        except Exception as e:  # noqa: BLE001
            res = {"case": name, "op": "?", "status": "fail", "kind": "harness",
                   "error": f"{type(e).__name__}: {e}"}
        res["seconds"] = round(time.perf_counter() - t0, 3)
        proto.write(json.dumps(res) + "\n")


# --------------------------------------------------------------------------------------
# Parent side.


class _Child:
    def __init__(self, python):
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen(
            [python, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
        self.buf = b""

    def ask(self, name, timeout):
        """The child's answer for `name`, or (None, 'crash' | 'timeout')."""
        try:
            self.proc.stdin.write((name + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None, "crash"
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, "timeout"
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None, "crash"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            return json.loads(line), None
        except ValueError:
            return None, "crash"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        return self.proc.returncode

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


def run_cases(names, workers=2, timeout=60.0, python=None, progress=None):
    """Runs the named cases in `workers` child processes; returns {case: result dict}.
    A case whose child crashes or exceeds `timeout` seconds is a failure of kind 'crash'
    or 'timeout'; the child is replaced and the run goes on."""
    python = python or sys.executable
    queue = collections.deque(names)
    lock = threading.Lock()
    results = {}

    def work():
        child = None
        while True:
            with lock:
                if not queue:
                    break
                name = queue.popleft()
            if child is None:
                child = _Child(python)
            t0 = time.perf_counter()
            res, why = child.ask(name, timeout)
            if res is None:
                rc = child.kill()
                child = None
                res = {"case": name, "op": "?", "status": "fail", "kind": why,
                       "error": (f"no answer within {timeout:g} s" if why == "timeout" else
                                 f"worker died (exit status {rc})"),
                       "seconds": round(time.perf_counter() - t0, 3)}
            with lock:
                results[name] = res
                if progress:
                    progress(res, len(results))
        if child is not None:
            child.close()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Cases whose worker died or timed out have no op yet: read it from the model.
    missing = [r for r in results.values() if r["op"] == "?"]
    if missing:
        import onnx

        for r in missing:
            try:
                m = onnx.load(os.path.join(node_dir(), r["case"], "model.onnx"))
                r["op"] = _case_operator(r["case"], m)
            except Exception:  # noqa: BLE001
                pass
    return results


def read_pass_list(path=PASS_LIST):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


# Cases whose expected outputs are draws from numpy's global random generator (not from
# the node's seed): ortlite can only match them by chance, so they never join the list.
NEVER_LISTED = {
    "test_bernoulli", "test_bernoulli_double", "test_bernoulli_double_expanded",
    "test_bernoulli_expanded", "test_bernoulli_seed", "test_bernoulli_seed_expanded",
}


def write_pass_list(passed, path=PASS_LIST):
    import onnx

    passed = [c for c in passed if c not in NEVER_LISTED]
    with open(path, "w") as f:
        f.write("# ONNX node conformance cases ortlite passes (onnx "
                f"{onnx.__version__}); written by `python tools/conformance.py --update`.\n")
        f.write("# tests/ops/test_onnx_node.py fails when one of these stops passing.\n")
        for name in sorted(passed):
            f.write(name + "\n")


def compare_with_pass_list(results, listed):
    """(regressed, new): listed cases that did not pass, and passing cases not listed."""
    listed_set = set(listed)
    regressed = sorted(c for c in listed_set
                       if c not in results or results[c]["status"] != "pass")
    new = sorted(c for c, r in results.items()
                 if r["status"] == "pass" and c not in listed_set and c not in NEVER_LISTED)
    return regressed, new


# Operator families for the summary; operators not listed count as "core" (elementwise,
# reduction, tensor and nn operators).
FAMILIES = {
    "recurrent": "RNN GRU LSTM",
    "control flow": "If Loop Scan SequenceMap",
    "sequence / optional": "SequenceInsert SequenceAt SequenceConstruct SequenceEmpty "
                           "SequenceErase SequenceLength SplitToSequence ConcatFromSequence "
                           "Optional OptionalHasElement OptionalGetElement",
    "quantization": "QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearConv "
                    "QLinearMatMul MatMulInteger ConvInteger",
    "random": "RandomNormal RandomUniform RandomNormalLike RandomUniformLike Bernoulli "
              "Multinomial",
    "cast / element types": "Cast CastLike BitCast",
    "signal": "DFT STFT MelWeightMatrix HannWindow HammingWindow BlackmanWindow",
    "string": "StringConcat StringSplit StringNormalizer RegexFullMatch",
    "ai.onnx.ml": "LabelEncoder TreeEnsemble TreeEnsembleRegressor TreeEnsembleClassifier "
                  "Binarizer ArrayFeatureExtractor LinearClassifier LinearRegressor Normalizer "
                  "ZipMap Scaler",
    "training": "Adagrad Adam Momentum Gradient",
    "attention / preview": "Attention FlexAttention LinearAttention CausalConvWithState "
                           "RotaryEmbedding RMSNormalization",
}
_FAMILY_OF = {op: fam for fam, ops in FAMILIES.items() for op in ops.split()}


def family_of(op):
    return _FAMILY_OF.get(op.split("::")[-1], "core")


def by_family(results):
    table = collections.defaultdict(lambda: [0, 0])
    for r in results.values():
        f = family_of(r["op"])
        table[f][1] += 1
        table[f][0] += r["status"] == "pass"
    return table


def by_operator(results):
    table = collections.defaultdict(lambda: [0, 0])
    for r in results.values():
        table[r["op"]][1] += 1
        if r["status"] == "pass":
            table[r["op"]][0] += 1
    return table


def failure_kinds(results):
    return collections.Counter(r["kind"] for r in results.values() if r["status"] != "pass")


def render_doc(results, seconds, workers):
    import onnx

    import ortlite

    n = len(results)
    passed = sum(r["status"] == "pass" for r in results.values())
    table = by_operator(results)
    kinds = failure_kinds(results)
    lines = [
        "# ONNX node conformance",
        "",
        "Generated by `python tools/conformance.py --update`; the list of passing cases is",
        "tests/onnx_node_pass.txt, which `tests/ops/test_onnx_node.py` (part of `make test`)",
        "holds ortlite to: a listed case that fails is a test failure.",
        "",
        "Every node test case shipped in the onnx wheel (onnx/backend/test/data/node) is",
        "loaded with `ortlite.InferenceSession`, fed its `test_data_set_*` inputs and",
        "compared with its expected outputs as onnx's backend runner does: same shape,",
        f"same dtype, `np.testing.assert_allclose` with rtol={DEFAULT_RTOL:g}, "
        f"atol={DEFAULT_ATOL:g}",
        "(or the case's data.json values). Sequence inputs and outputs are lists of arrays,",
        "optional ones an array, a list or None, as with onnxruntime.",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- ortlite {ortlite.__version__}, onnx {onnx.__version__}",
        f"- **{passed} of {n} cases pass** ({100.0 * passed / max(n, 1):.1f}%)",
        f"- run time: {seconds:.0f} s with {workers} worker processes",
        "",
        "Failures by reason: " + ", ".join(f"{k or '?'} {v}" for k, v in kinds.most_common())
        + ".",
        "(load: the model does not load, mostly `NotImplemented` for a missing operator;",
        "opset: the operator exists but not at the model's opset (24 and newer);",
        "run: an error while running; mismatch: wrong values, shape or dtype;",
        "unsupported-input: input data of a type ortlite cannot feed; crash/timeout: the worker died or hung.)",
        "",
        "## By family",
        "",
        "`core` is every operator not named in `FAMILIES` (tools/conformance.py):",
        "elementwise, reduction, tensor and nn operators.",
        "",
        "| family | passed | cases |",
        "|---|---:|---:|",
    ]
    fams = by_family(results)
    for fam in sorted(fams, key=lambda f: -fams[f][1]):
        p, c = fams[fam]
        lines.append(f"| {fam} | {p} | {c} |")
    lines += [
        "",
        "## By operator",
        "",
        "Cases are grouped by the operator they test: the op_type of the model's node; for",
        "an `*_expanded` case, the operator of the case it expands; for other multi-node",
        "cases, the node op_type the case name starts with. The last column gives the",
        "reasons of the failures.",
        "",
        "| operator | passed | cases | failures |",
        "|---|---:|---:|---|",
    ]
    reasons = collections.defaultdict(collections.Counter)
    for r in results.values():
        if r["status"] != "pass":
            reasons[r["op"]][r["kind"]] += 1
    for op in sorted(table, key=lambda o: o.lower()):
        p, c = table[op]
        why = ", ".join(f"{k} {v}" for k, v in reasons[op].most_common())
        lines.append(f"| {op} | {p} | {c} | {why} |")
    lines.append(f"| **total** | **{passed}** | **{n}** | |")
    missing = collections.Counter()
    for r in results.values():
        m = re.search(r"no kernel for op '([^']+)' \(domain '([^']*)', opset (\d+)\)",
                      r.get("error", ""))
        if r["status"] != "pass" and r["kind"] in ("load", "opset") and m:
            dom = "" if m.group(2) in ("", "ai.onnx") else m.group(2) + "::"
            tag = " (opset > 23)" if r["kind"] == "opset" else ""
            missing[f"{dom}{m.group(1)}{tag}"] += 1
    opset_cases = sum(1 for r in results.values() if r["kind"] == "opset")
    lines += ["", "## What is missing", ""]
    if opset_cases:
        lines += [
            f"{opset_cases} cases fail only because their model uses an opset newer than the",
            "one ortlite implements for their operator.",
        ]
    lines += [
        "The operators whose absence fails the most cases (the first operator a model needs",
        "that ortlite lacks):",
        "",
        "| operator | cases |",
        "|---|---:|",
    ]
    for op, c in missing.most_common(25):
        lines.append(f"| {op} | {c} |")
    return "\n".join(lines) + "\n"


def main(argv):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--failures", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--json", help="also write every case's result to this file")
    ap.add_argument("-k", dest="pattern")
    args = ap.parse_args(argv)
    if args.worker:
        worker_main()
        return 0
    names = list_cases()
    if args.pattern:
        names = [n for n in names if args.pattern in n]
    t0 = time.perf_counter()
    from ortlite._progress import progress

    with progress(len(names), "conformance", "cases") as bar:
        results = run_cases(names, workers=args.workers, timeout=args.timeout,
                            progress=lambda res, done: bar.update())
    seconds = time.perf_counter() - t0
    n = len(results)
    passed = sorted(c for c, r in results.items() if r["status"] == "pass")
    table = by_operator(results)
    width = max([len(op) for op in table] + [8])
    print(f"{'operator':<{width}}  passed  cases")
    for op in sorted(table, key=lambda o: o.lower()):
        p, c = table[op]
        print(f"{op:<{width}}  {p:>6}  {c:>5}")
    print()
    fams = by_family(results)
    print(f"{'family':<{width}}  passed  cases")
    for fam in sorted(fams, key=lambda f: -fams[f][1]):
        p, c = fams[fam]
        print(f"{fam:<{width}}  {p:>6}  {c:>5}")
    if args.failures:
        print()
        for c in sorted(results):
            r = results[c]
            if r["status"] != "pass":
                print(f"FAIL {c} [{r['op']}] {r['kind']}: {r['error'][:200]}")
    print()
    print("failures by reason:", dict(failure_kinds(results).most_common()))
    print(f"{len(passed)} of {n} cases pass ({seconds:.0f} s, {args.workers} workers)")
    allowed = set(read_pass_list())
    regressed = sorted(c for c in allowed if c in results and results[c]["status"] != "pass")
    if regressed:
        print(f"{len(regressed)} cases on tests/onnx_node_pass.txt fail: {regressed}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    if args.update:
        if args.pattern:
            print("--update ignored with -k")
        else:
            write_pass_list(passed)
            with open(DOC, "w") as f:
                f.write(render_doc(results, seconds, args.workers))
            print(f"wrote {PASS_LIST} and {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
