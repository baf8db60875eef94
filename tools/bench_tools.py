"""ortlite vs onnxruntime on the models onnxruntime's own tools write: dynamic and static
quantization (QDQ, QOperator), int4 weights (MatMulNBitsQuantizer), float16 and the
transformers optimizer's fused BERT and GPT-2 models, each from a seeded float model
(tools/tool_models.py).

usage: python tools/bench_tools.py [--quick] [--only mlp,qdq,...] [--json PATH] [--write-docs]

Both runtimes run in this process at intra_op_num_threads=1, interleaved as in
tools/bench.py; outputs are compared first (tolerances in tool_models.CASES, justified
there). Prints per model: load and match, both times, the ratio (above 1: ortlite faster), the
resident memory that creating the session and running it added for each runtime (a fresh
process per runtime and model), and the geometric mean.
"""

import argparse
import datetime
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import bench  # noqa: E402
import bench_real  # noqa: E402
import tool_models  # noqa: E402

OUT_DIR = ROOT / "build" / "bench_tools"
BEGIN = "<!-- bench_tools -->"
END = "<!-- /bench_tools -->"


# Run in a fresh interpreter per runtime and model (argv: runtime, model path, feeds .npz):
# the resident memory (anonymous and file-backed pages) that creating the session adds, and
# the process's peak after three runs, less what it held before the session. A fresh process
# has no freed heap from earlier models for the session to reuse, so what the session takes
# is counted (in the benchmark's own process it was hidden: 0.0 MiB rows).
RSS_CHILD = r"""
import importlib, json, sys
import numpy as np
def status():
    v = {}
    for line in open("/proc/self/status"):
        k, _, rest = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            v[k] = int(rest.split()[0]) / 1024.0
    return v
rt = importlib.import_module(sys.argv[1])
feeds = dict(np.load(sys.argv[3]))
so = rt.SessionOptions()
so.intra_op_num_threads = 1
if sys.argv[1] == "onnxruntime":
    so.log_severity_level = 3
before = status()["VmRSS"]
s = rt.InferenceSession(sys.argv[2], so, providers=["CPUExecutionProvider"])
load = status()["VmRSS"] - before
for _ in range(3):
    s.run(None, feeds)
print(json.dumps({"load": load, "peak": status()["VmHWM"] - before}))
"""


def session_rss(runtime, path, feeds_path):
    """{"load": MiB, "peak": MiB} of RSS_CHILD, or None when the child fails."""
    import subprocess

    r = subprocess.run([sys.executable, "-c", RSS_CHILD, runtime, str(path), str(feeds_path)],
                       capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    if r.returncode != 0:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure(fm, kind, rtol, atol, st, tmp):
    import onnxruntime

    import ortlite

    import onnx

    row = {"name": f"{fm} {kind}", "status": "ok"}
    model = tool_models.variant(kind, tool_models.FLOAT_MODELS[fm](), tmp)
    data = model.SerializeToString()
    row["ops"] = sorted({(n.domain + "." if n.domain else "") + n.op_type for n in model.graph.node})
    feeds = tool_models.feeds(model)
    model_path, feeds_path = tmp / "model.onnx", tmp / "feeds.npz"
    onnx.save(model, str(model_path))
    np.savez(feeds_path, **feeds)
    sessions, outs = {}, {}
    for label, rt in (("ortlite", ortlite), ("onnxruntime", onnxruntime)):
        so = rt.SessionOptions()
        so.intra_op_num_threads = 1
        if label == "onnxruntime":
            so.log_severity_level = 3
        try:
            sessions[label] = rt.InferenceSession(data, so, providers=["CPUExecutionProvider"])
            outs[label] = [np.asarray(o) for o in sessions[label].run(None, feeds)]
        except Exception as e:  # noqa: BLE001
            row.update(status=f"{label} fails",
                       error=f"{type(e).__name__}: {e}".replace("\n", " ")[:300])
            return row
    for label in ("ortlite", "onnxruntime"):
        r = session_rss(label, model_path, feeds_path)
        if r:
            row[f"{label}_load_rss_mib"], row[f"{label}_peak_rss_mib"] = r["load"], r["peak"]
    ok, diff, msg = bench_real.compare_outputs(outs["ortlite"], outs["onnxruntime"], rtol, atol)
    row.update(max_abs_diff=diff, rtol=rtol, atol_rel=atol)
    if not ok:
        row.update(status="MISMATCH", error=msg)
    lite, ref = sessions["ortlite"], sessions["onnxruntime"]
    res = bench.interleaved([("ortlite", lambda: lite.run(None, feeds)),
                             ("onnxruntime", lambda: ref.run(None, feeds))], st)
    tl, tr = res["ortlite"][0], res["onnxruntime"][0]
    row.update(ortlite_s=tl, onnxruntime_s=tr, ratio=tr / tl)
    return row


def baseline_rss(tmp):
    """session_rss of a one-Identity model for both runtimes: their fixed cost per session."""
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp / "identity.onnx"))
    np.savez(tmp / "identity.npz", x=np.zeros((1, 4), np.float32))
    return {rt: session_rss(rt, tmp / "identity.onnx", tmp / "identity.npz")
            for rt in ("ortlite", "onnxruntime")}


def table(rows):
    head = ["model", "status", "max|diff|", "ortlite", "onnxruntime", "ort/lite",
            "load RSS lite / ort", "peak RSS lite / ort"]
    order = sorted(rows, key=lambda r: (r["status"] == "ok", r.get("ratio") or 0))

    def mib(r, what):
        a, b = r.get(f"ortlite_{what}_rss_mib"), r.get(f"onnxruntime_{what}_rss_mib")
        return f"{a:.1f} / {b:.1f} MiB" if a is not None and b is not None else "-"

    lines = []
    for r in order:
        lines.append([r["name"], r["status"],
                      f"{r['max_abs_diff']:.2g}" if r.get("max_abs_diff") is not None else "-",
                      bench_real.fmt_time(r.get("ortlite_s")),
                      bench_real.fmt_time(r.get("onnxruntime_s")),
                      f"{r['ratio']:.2f}" if r.get("ratio") else "-", mib(r, "load"),
                      mib(r, "peak")])
    g = bench_real.geomean([r.get("ratio") for r in rows])
    lines.append(["geometric mean", "", "", "", "", f"{g:.2f}" if g else "-", "", ""])
    return head, lines


def _base(report):
    b = report.get("baseline_rss") or {}
    lite, ort = b.get("ortlite"), b.get("onnxruntime")
    if not lite or not ort:
        return "(not measured)"
    return f"{lite['load']:.1f} MiB in ortlite and {ort['load']:.1f} MiB in onnxruntime"


def docs_block(report):
    head, lines = table(report["rows"])
    fails = "\n".join(f"- {r['name']}: {r['status']}: {r.get('error', '')}"
                      for r in report["rows"] if r["status"] != "ok")
    ops = "\n".join(f"| {r['name']} | {', '.join(r.get('ops', []))} |" for r in report["rows"])
    return f"""## Models written by onnxruntime's tools (tools/bench_tools.py)

<!-- Generated by `make bench-tools BENCH_TOOLS_ARGS=--write-docs`; rewritten on each run. -->

Seeded float models (tools/tool_models.py: an MLP, a CNN, an LSTM, a 2-layer BERT encoder
and a 2-block GPT-2 decoder) put through onnxruntime's quantize_dynamic, quantize_static (QDQ
and QOperator), MatMulNBitsQuantizer, float16 conversion (keep_io_types) and the transformers
optimizer (`opt`; `opt_dynamic` / `opt_nbits`: its model quantized after it), {report['date']} (the run took {report['duration_s']:.0f} s). Command:
`{report['command']}`. Both runtimes in one process at one thread, interleaved, median per
call; `ort/lite` above 1: ortlite is faster. `load RSS`: the resident memory (anonymous and
file-backed pages) that creating the session from the model file added, and `peak RSS` the
process's peak after three runs less its memory before the session, each measured in a fresh
process per runtime and model (ortlite maps the file and reads initializers in place; int4
MatMulNBits weights stay packed and are dequantized block by block as they are used). A
session of one Identity node takes {_base(report)}: the runtimes' fixed cost per session.

{bench_real.md_table(head, lines)}
{("Not loading or not matching:" + chr(10) + chr(10) + fails + chr(10)) if fails else ""}
Operators in each model:

| model | operators |
|---|---|
{ops}
"""


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="", help="comma-separated words of model names")
    p.add_argument("--json", default=str(OUT_DIR / "bench_tools.json"))
    p.add_argument("--write-docs", action="store_true")
    args = p.parse_args(argv)
    command = " ".join(shlex.quote(x) for x in
                       ["python", os.path.relpath(__file__, Path.cwd())] + list(argv))
    print(f"command: {command}", flush=True)
    started = time.perf_counter()
    st = bench.Settings(args.quick)
    words = [w for w in args.only.split(",") if w]
    cases = [c for c in tool_models.CASES
             if not words or any(w in f"{c[0]} {c[1]}" for w in words)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        baseline = baseline_rss(Path(tmp))
        for fm, kind, rtol, atol in cases:
            d = Path(tmp) / f"{fm}_{kind}"
            d.mkdir()
            r = measure(fm, kind, rtol, atol, st, d)
            rows.append(r)
            figs = (f"ortlite {bench_real.fmt_time(r['ortlite_s'])}, onnxruntime "
                    f"{bench_real.fmt_time(r['onnxruntime_s'])}, ratio {r['ratio']:.2f}"
                    if r.get("ratio") else "")
            err = f" [{r['status']}: {r.get('error', '')}]" if r["status"] != "ok" else ""
            print(f"{r['name']}: {figs}{err}", flush=True)
    head, lines = table(rows)
    print()
    print(bench_real.text_table(head, lines))
    print("session of one Identity node: " + _base({"baseline_rss": baseline}))
    report = {"command": command, "rows": rows, "baseline_rss": baseline,
              "duration_s": time.perf_counter() - started,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=float))
    print(f"wrote {out}")
    if args.write_docs:
        bench_real.write_docs_block(report, BEGIN, END, docs_block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
