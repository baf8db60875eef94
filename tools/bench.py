"""ortlite vs onnxruntime: latency, import time, load time, peak RSS and sgemm throughput.

usage: python tools/bench.py [--quick] [--only tiny,mlp,...] [--threads 1,2]
                             [--json build/bench/bench.json] [--write-docs]

Both runtimes are timed in this one process, interleaved (an ortlite repetition, then an
onnxruntime repetition, ...), with the same intra_op_num_threads and otherwise default
session options (onnxruntime: default graph optimizations, CPUExecutionProvider). Before a
workload is timed, the outputs of the two runtimes are compared; a workload whose outputs
differ, or that one runtime cannot load, gets no figures and makes the exit status 1.
Missed targets do not change the exit status: this is a report, not a gate.

Models are generated deterministically by tools/bench_models.py into build/bench/.
"""

import argparse
import datetime
import gc
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the in-place build: ortlite/_ortlite*.so
sys.path.insert(0, str(ROOT / "tools"))

import bench_models  # noqa: E402
from settle import settle  # noqa: E402

WORKLOADS = ("tiny", "mlp", "resnet18", "mobilenetv2", "bert", "import", "load", "rss", "sgemm")
RTOL = 1e-3
ATOL_REL = 1e-4  # absolute tolerance, as a fraction of the reference output's largest |value|
LOAD_MIB = 100
SGEMM_N = 1024
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw",
              "avx512vl", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16",
              "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve")
CHOICES_BEGIN = "<!-- choices -->"
CHOICES_END = "<!-- /choices -->"


class Settings:
    def __init__(self, quick):
        self.quick = quick
        self.reps = 3 if quick else 11  # timed repetitions per runtime (median reported)
        self.rep_seconds = 0.01 if quick else 0.3  # a repetition repeats calls to last this
        # Untimed pause before each repetition, at least this long and until the worker
        # threads the other runtime left spinning are idle (tools/settle.py), so they do not
        # take cores from the repetition being timed.
        self.gap_seconds = 0.002 if quick else 0.02
        self.warm_seconds = 0.02 if quick else 0.3
        self.load_reps = 3 if quick else 7
        self.import_reps = 5 if quick else 31
        self.rss_reps = 1 if quick else 3


# --- machine ---------------------------------------------------------------------------------


def _lscpu():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    info = {}
    for line in out.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            info[k.strip()] = v.strip()
    return info


def _cpuinfo():
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    info = {}
    for line in text.split("\n\n")[0].splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            info[k.strip()] = v.strip()
    return info


def _mem_total_gib():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return None


def machine():
    import onnx
    import onnxruntime

    import ortlite

    lscpu, cpuinfo = _lscpu(), _cpuinfo()
    flags = set((cpuinfo.get("flags") or lscpu.get("Flags", "")).split())
    sockets = int(lscpu.get("Socket(s)", "1") or 1)
    per_socket = lscpu.get("Core(s) per socket")
    cores = int(per_socket) * sockets if per_socket else (os.cpu_count() or 1)
    mem = _mem_total_gib()
    os_name = platform.platform()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = f"{line.split('=', 1)[1].strip(chr(34))} ({platform.release()})"
    except OSError:
        pass
    return {
        "cpu": cpuinfo.get("model name") or lscpu.get("Model name") or platform.processor(),
        "cpu_family_model": f"{lscpu.get('CPU family', '?')}/{lscpu.get('Model', '?')}",
        "hypervisor": lscpu.get("Hypervisor vendor"),
        "logical_cpus": os.cpu_count(),
        "physical_cores": cores,
        "threads_per_core": lscpu.get("Thread(s) per core"),
        "caches": {k: lscpu[k] for k in ("L1d cache", "L2 cache", "L3 cache") if k in lscpu},
        "simd_flags": [f for f in SIMD_FLAGS if f in flags],
        "memory_gib": round(mem, 1) if mem else None,
        "os": os_name,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "ortlite": ortlite.__version__,
    }, flags, lscpu, cpuinfo, cores


def peak_flops(flags, lscpu, cpuinfo, cores):
    """Single-precision peak from the SIMD flags and the clock, with the assumptions spelled
    out (cpufreq is often absent in VMs, so the clock is what the CPU reports)."""
    if "avx512f" in flags:
        lanes, isa = 16, "AVX-512 (avx512f)"
    elif "avx2" in flags or "avx" in flags:
        lanes, isa = 8, "AVX2/AVX (256-bit)"
    else:
        lanes, isa = 4, "SSE (128-bit)"
    has_fma = "fma" in flags or "avx512f" in flags
    # Server cores with AVX-512 (and client cores since Haswell for AVX2) issue two vector
    # FMAs per cycle; without FMA a mul and an add issue side by side, the same 2 flops.
    fma_units = 2
    mhz, clock_src = None, None
    if lscpu.get("CPU max MHz"):
        mhz, clock_src = float(lscpu["CPU max MHz"]), "lscpu 'CPU max MHz'"
    if mhz is None:
        m = re.search(r"@\s*([\d.]+)\s*GHz", cpuinfo.get("model name", ""))
        if m:
            mhz, clock_src = float(m.group(1)) * 1000, "the GHz in the CPU model name"
    if mhz is None and cpuinfo.get("cpu MHz"):
        mhz, clock_src = float(cpuinfo["cpu MHz"]), "/proc/cpuinfo 'cpu MHz'"
    if mhz is None:
        mhz, clock_src = 2000.0, "no clock reported: assumed 2000 MHz"
    per_core = 2 * fma_units * lanes * mhz * 1e6 / 1e9
    how = (f"2 flops per FMA x {fma_units} FMA units (assumed) x {lanes} fp32 lanes "
           f"({isa}{'' if has_fma else ', no FMA flag: mul+add counted as one FMA'}) x "
           f"{mhz:.0f} MHz (from {clock_src}; the sustained AVX clock may differ: turbo raises "
           f"it, heavy AVX-512 lowers it) = {per_core:.1f} GFLOP/s per core; x {cores} cores = "
           f"{per_core * cores:.1f} GFLOP/s")
    return {"per_core_gflops": per_core, "cores": cores, "all_cores_gflops": per_core * cores,
            "fma_units": fma_units, "lanes": lanes, "mhz": mhz, "derivation": how}


def measured_peak(flags, peak, out_dir, runs=5, ms=200):
    """One core's FMA throughput as measured (tools/fma_peak.c: 16 independent FMA chains on
    registers, built for the widest vector ISA the CPU reports; the best of `runs` runs, as
    load only ever lowers it). It replaces the assumed per-core peak when it can be measured:
    the assumption of two FMA units at the full vector width is wrong for cores that split a
    512-bit FMA into two 256-bit halves (AMD Zen 4). None when no C compiler builds it."""
    isa = ["-mavx512f", "-mfma"] if "avx512f" in flags else ["-mavx2", "-mfma"]
    if "avx512f" not in flags and "fma" not in flags:
        return None
    exe = out_dir / "fma_peak"
    cc = os.environ.get("CC", "cc").split()
    try:
        subprocess.run(cc + ["-O2", *isa, str(ROOT / "tools" / "fma_peak.c"), "-o", str(exe)],
                       check=True, capture_output=True, timeout=120)
        best = max(float(subprocess.run([str(exe), str(ms)], check=True, capture_output=True,
                                        text=True, timeout=60).stdout.split()[0])
                   for _ in range(runs))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    assumed = peak["per_core_gflops"]
    peak = dict(peak, per_core_gflops=best, all_cores_gflops=best * peak["cores"],
                assumed_per_core_gflops=assumed)
    peak["derivation"] = (
        f"measured: {best:.1f} GFLOP/s per core, the best of {runs} runs of tools/fma_peak.c "
        f"({' '.join(isa)}: 16 independent FMA chains, {ms} ms each); x {peak['cores']} cores = "
        f"{best * peak['cores']:.1f} GFLOP/s. The assumed figure, "
        + peak["derivation"] + f", is {assumed / best:.2f}x what this core issues")
    return peak


# --- runtimes ----------------------------------------------------------------------------------


def make_sessions(path, threads):
    import onnxruntime

    import ortlite

    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    lite = ortlite.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = threads
    ref = onnxruntime.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return lite, ref


def compare(lite_out, ref_out):
    """Largest |difference| over all outputs; raises when outside the tolerance."""
    worst = 0.0
    for i, (a, b) in enumerate(zip(lite_out, ref_out)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise AssertionError(f"output {i}: ortlite {a.dtype}{a.shape} vs onnxruntime "
                                 f"{b.dtype}{b.shape}")
        atol = ATOL_REL * float(np.max(np.abs(b))) if b.size else 0.0
        diff = float(np.max(np.abs(a.astype(np.float64) - b))) if b.size else 0.0
        if not np.allclose(a, b, rtol=RTOL, atol=atol):
            raise AssertionError(f"output {i}: outputs differ (max |diff| {diff:.3e}, "
                                 f"rtol {RTOL}, atol {atol:.3e})")
        worst = max(worst, diff)
    if len(lite_out) != len(ref_out):
        raise AssertionError(f"{len(lite_out)} outputs vs {len(ref_out)}")
    return worst


def interleaved(fns, st):
    """fns: [(label, callable)]. Warm-up, then st.reps rounds of one repetition per runtime
    in turn. A repetition repeats the call enough times to last st.rep_seconds (at least
    once). Returns {label: (median seconds per call, [per-call samples], calls per rep)}."""
    calls = {}
    for label, fn in fns:
        n, t0 = 0, time.perf_counter_ns()
        while n < 2 or time.perf_counter_ns() - t0 < st.warm_seconds * 1e9:
            fn()
            n += 1
        per_call = (time.perf_counter_ns() - t0) / n / 1e9
        calls[label] = max(1, math.ceil(st.rep_seconds / per_call))
    samples = {label: [] for label, _ in fns}
    gc.collect()
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(st.reps):
            for label, fn in fns:
                n = calls[label]
                settle(minimum=st.gap_seconds)
                t0 = time.perf_counter_ns()
                for _ in range(n):
                    fn()
                samples[label].append((time.perf_counter_ns() - t0) / n / 1e9)
    finally:
        if gc_was:
            gc.enable()
    return {label: (statistics.median(s), s, calls[label]) for label, s in samples.items()}


# --- rows --------------------------------------------------------------------------------------


def row(workload, threads, unit, lite, ref, ratio, target=None, met=None, **extra):
    r = {"workload": workload, "threads": threads, "unit": unit, "ortlite": lite,
         "onnxruntime": ref, "ratio": ratio, "target": target, "met": met}
    r.update(extra)
    return r


def latency_rows(name, builder, threads_list, st, out_dir, target):
    model, feeds = builder()
    path = out_dir / (re.sub(r"\W+", "_", name) + ".onnx")
    bench_models.save(model, path)
    measured = []
    for t in threads_list:
        lite, ref = make_sessions(path, t)
        diff = compare(lite.run(None, feeds), ref.run(None, feeds))
        res = interleaved([("ortlite", lambda: lite.run(None, feeds)),
                           ("onnxruntime", lambda: ref.run(None, feeds))], st)
        measured.append((t, diff, res))
        del lite, ref
    # One unit for all thread counts of a workload, so its rows read side by side.
    fastest = min(v[0] for _, _, res in measured for v in res.values())
    unit, scale = ("us", 1e6) if fastest < 2e-3 else ("ms", 1e3)
    rows = []
    for t, diff, res in measured:
        (tl, sl, cl), (tr, sr, cr) = res["ortlite"], res["onnxruntime"]
        ratio = tr / tl
        rows.append(row(name, t, unit, tl * scale, tr * scale, ratio, f">= {target}",
                        ratio >= target, max_abs_diff=diff,
                        samples={"ortlite": [x * scale for x in sl],
                                 "onnxruntime": [x * scale for x in sr]},
                        calls_per_rep={"ortlite": cl, "onnxruntime": cr}))
    return rows


def _child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


# Linux carries a process's peak RSS across execve (ru_maxrss starts at the peak of the
# address space it replaces), so a child spawned straight from this large process would
# report at least our own peak. A small launcher in between has a fresh signal struct and
# a small address space: its children's ru_maxrss is their own.
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def _child(code, *args, launcher=False):
    cmd = [sys.executable, "-c", code, *args]
    if launcher:
        cmd = [sys.executable, "-c", LAUNCHER] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_child_env(),
                         timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"child process failed ({out.returncode}): {out.stderr.strip()[-800:]}")
    return out.stdout.strip().splitlines()[-1]


def _wall(code):
    """Wall time in ms of a fresh `python -c code` process, start to exit, and the child's
    last printed line."""
    t = time.perf_counter_ns()
    out = _child(code + "\nprint('ok')" if "print(" not in code else code)
    return (time.perf_counter_ns() - t) / 1e6, out


# The import statement timed inside the child as well (perf_counter around it; numpy is
# imported before the clock starts in all three).
_STMT = "import numpy, time\nt = time.perf_counter()\n{}\nprint((time.perf_counter() - t) * 1e3)"


def import_rows(st):
    """`python -c "import numpy; import X"` minus `python -c "import numpy"`: whole fresh
    processes, start to exit (interpreter teardown included), the three kinds interleaved;
    the median of each, then the difference. ortlite's figure is at least its import
    statement's own time in the same processes: the whole-process difference is the smaller
    one only through noise (it came out negative here, twice in a row), which would make
    the ratio meaningless."""
    codes = {"numpy": _STMT.format("pass"), "ortlite": _STMT.format("import ortlite"),
             "onnxruntime": _STMT.format("import onnxruntime")}
    for code in codes.values():  # warm the file cache and the bytecode caches
        _wall(code)
    walls = {k: [] for k in codes}
    stmts = {k: [] for k in codes}
    for _ in range(st.import_reps):
        for k, code in codes.items():
            w, out = _wall(code)
            walls[k].append(w)
            stmts[k].append(float(out))
    # The median of the differences within each round (a numpy-only process, then the
    # two others, back to back): a fresh interpreter's wall time here varies by +-20 ms
    # between rounds, ten times what ortlite adds, and the three processes of one round
    # share the machine's state of the moment.
    tl = statistics.median(a - b for a, b in zip(walls["ortlite"], walls["numpy"]))
    tr = statistics.median(a - b for a, b in zip(walls["onnxruntime"], walls["numpy"]))
    sl, sr = statistics.median(stmts["ortlite"]), statistics.median(stmts["onnxruntime"])
    tl_eff = max(tl, sl)
    return [row("import", "-", "ms", tl_eff, tr, tr / tl_eff if tl_eff > 0 else float("nan"),
                ">= 8.0", tl_eff > 0 and tr / tl_eff >= 8.0, samples=walls,
                statement_ms={"ortlite": sl, "onnxruntime": sr}, process_diff_ms=tl,
                note="process wall time beyond `python -c 'import numpy'`, fresh processes, "
                     "median over rounds of the difference within a round; ortlite's figure "
                     f"is at least its import statement's own time (process difference "
                     f"{tl:.2f} ms; import statements: ortlite {sl:.2f} ms, onnxruntime "
                     f"{sr:.2f} ms)")]


def load_rows(st, out_dir):
    import onnxruntime

    import ortlite

    model, feeds = bench_models.big_chain(LOAD_MIB)
    path = out_dir / f"chain_{LOAD_MIB}mib.onnx"
    bench_models.save(model, path)
    size_mib = path.stat().st_size / (1 << 20)
    lite, ref = make_sessions(path, 1)
    diff = compare(lite.run(None, feeds), ref.run(None, feeds))
    del lite, ref

    def load_lite():
        so = ortlite.SessionOptions()
        so.intra_op_num_threads = 1
        gc.collect()
        t = time.perf_counter_ns()
        s = ortlite.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        dt = time.perf_counter_ns() - t
        del s
        return dt / 1e6

    def load_ref():
        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = 1
        gc.collect()
        t = time.perf_counter_ns()
        s = onnxruntime.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        dt = time.perf_counter_ns() - t
        del s
        return dt / 1e6

    load_lite(), load_ref()  # warm-up: page cache, first-use allocations
    samples = {"ortlite": [], "onnxruntime": []}
    for _ in range(st.load_reps):
        samples["ortlite"].append(load_lite())
        samples["onnxruntime"].append(load_ref())
    tl, tr = statistics.median(samples["ortlite"]), statistics.median(samples["onnxruntime"])
    return [row(f"load {LOAD_MIB} MiB", 1, "ms", tl, tr, tr / tl, ">= 2.0", tr / tl >= 2.0,
                samples=samples, max_abs_diff=diff, model_file_mib=round(size_mib, 1))]


RSS_CODE = """
import resource, sys
import numpy as np
mod, path = sys.argv[1], sys.argv[2]
rt = __import__(mod)
so = rt.SessionOptions()
so.intra_op_num_threads = 1
sess = rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
for _ in range(10):
    sess.run(None, {"image": x})
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, VMHWM())
"""

# VmHWM (the peak RSS of the current address space, reset at exec) cross-checks ru_maxrss.
VMHWM = """
def VMHWM():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1
"""
RSS_CODE = VMHWM + RSS_CODE
BASELINE_CODE = VMHWM + """
import resource, numpy
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, VMHWM())
"""


def rss_rows(st, out_dir):
    path = out_dir / "resnet18.onnx"
    bench_models.save(bench_models.resnet18()[0], path)
    samples = {"ortlite": [], "onnxruntime": []}
    hwm = {"ortlite": [], "onnxruntime": []}
    for _ in range(st.rss_reps):
        for mod in samples:
            maxrss, vmhwm = _child(RSS_CODE, mod, str(path), launcher=True).split()
            samples[mod].append(int(maxrss) / 1024)  # KiB -> MiB
            hwm[mod].append(int(vmhwm) / 1024)
    base = int(_child(BASELINE_CODE, launcher=True).split()[0]) / 1024
    ml, mr = statistics.median(samples["ortlite"]), statistics.median(samples["onnxruntime"])
    return [row("peak RSS resnet18", 1, "MiB", ml, mr, mr / ml, "ortlite <= ort", ml <= mr,
                samples=samples, vmhwm_mib=hwm, python_numpy_baseline_mib=round(base, 1),
                note="ru_maxrss of a fresh process: import, load, 10 runs at 1 thread")]


def sgemm_rows(threads_list, st, out_dir, peak):
    model, feeds = bench_models.matmul(SGEMM_N)
    path = out_dir / f"matmul_{SGEMM_N}.onnx"
    bench_models.save(model, path)
    flops = 2.0 * SGEMM_N ** 3
    rows = []
    for t in threads_list:
        lite, ref = make_sessions(path, t)
        diff = compare(lite.run(None, feeds), ref.run(None, feeds))
        res = interleaved([("ortlite", lambda: lite.run(None, feeds)),
                           ("onnxruntime", lambda: ref.run(None, feeds))], st)
        tl, tr = res["ortlite"][0], res["onnxruntime"][0]
        gl, gr = flops / tl / 1e9, flops / tr / 1e9
        pct = 100 * gl / (peak["per_core_gflops"] * t)
        pct_ref = 100 * gr / (peak["per_core_gflops"] * t)
        # The target is about one core; at more threads the share of those cores' peak is shown.
        target, met = (">= 75% of core peak", pct >= 75.0) if t == 1 else (None, None)
        rows.append(row(f"sgemm {SGEMM_N}^3", t, "GFLOP/s", gl, gr, tr / tl, target, met,
                        max_abs_diff=diff, pct_of_peak=pct, onnxruntime_pct_of_peak=pct_ref,
                        peak_gflops=peak["per_core_gflops"] * t,
                        samples={k: [flops / x / 1e9 for x in v[1]] for k, v in res.items()}))
        del lite, ref
    return rows


# --- output ------------------------------------------------------------------------------------


def _fmt(v, unit):
    if v is None:
        return "-"
    if unit == "GFLOP/s":
        return f"{v:.1f} GFLOP/s"
    digits = 2 if v < 10 else 1 if v < 1000 else 0
    return f"{v:.{digits}f} {unit}"


def table(rows):
    head = ["workload", "threads", "ortlite", "onnxruntime", "ort/ortlite", "target", "met"]
    lines = []
    for r in rows:
        if r.get("error"):
            lines.append([r["workload"], str(r["threads"]), "error", "error", "-", "-",
                          "no: " + r["error"][:80]])
            continue
        lite = _fmt(r["ortlite"], r["unit"])
        if "pct_of_peak" in r:
            lite += f" ({r['pct_of_peak']:.0f}% of peak)"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        lines.append([r["workload"], str(r["threads"]), lite, _fmt(r["onnxruntime"], r["unit"]),
                      f"{r['ratio']:.2f}", r["target"] or "-", met])
    return head, lines


def text_table(rows):
    head, lines = table(rows)
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), fmt.format(*("-" * w for w in widths))] +
                     [fmt.format(*ln).rstrip() for ln in lines])


def md_table(rows):
    head, lines = table(rows)
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(x.replace("|", "\\|") for x in ln) + " |" for ln in lines]
    return "\n".join(out)


DEFAULT_CHOICES = "(Hand-written notes on how the benchmark is set up go here.)"


# Blocks other tools write into the same page (tools/bench_real.py, tools/bench_ops.py):
# kept as they are, after the choices.
KEPT_BLOCKS = (("<!-- bench_real -->", "<!-- /bench_real -->"),
               ("<!-- bench_ops -->", "<!-- /bench_ops -->"))


def write_docs(report, path):
    choices = DEFAULT_CHOICES
    kept = []
    if path.exists():
        old = path.read_text()
        i, j = old.find(CHOICES_BEGIN), old.find(CHOICES_END)
        if 0 <= i < j:
            choices = old[i + len(CHOICES_BEGIN):j].strip("\n")
        for begin, end in KEPT_BLOCKS:
            i, j = old.find(begin), old.find(end)
            if 0 <= i < j:
                kept.append(old[i:j + len(end)])
    m = report["machine"]
    caches = ", ".join(f"{k.split()[0]} {v}" for k, v in m["caches"].items())
    guest = f", {m['hypervisor']} guest" if m["hypervisor"] else ""
    text = f"""# Performance

<!-- Generated by tools/bench.py --write-docs (`make bench BENCH_ARGS=--write-docs`) from
{report['json']}; edit only the part between the choices markers, the rest is rewritten. -->

ortlite against onnxruntime {m['onnxruntime']} (the pinned wheel), in one process, on the
machine below. Measured on {report['date']}; the run took {report['duration_s']:.0f} s.

Command: `{report['command']}`

## Machine

- CPU: {m['cpu']} (family/model {m['cpu_family_model']}{guest}), {m['physical_cores']} cores, \
{m['logical_cpus']} logical CPUs
- Caches: {caches or 'not reported'}
- SIMD flags: {' '.join(m['simd_flags']) or 'none found'}
- Memory: {m['memory_gib']} GiB
- OS: {m['os']}
- Python {m['python']}, numpy {m['numpy']}, onnx {m['onnx']}, onnxruntime {m['onnxruntime']}, \
ortlite {m['ortlite']}

## Results

Latency rows: median time per `run` call over {report['settings']['reps']} interleaved
repetitions. `ort/ortlite` is onnxruntime's time over ortlite's (above 1: ortlite is faster);
for peak RSS it is onnxruntime's RSS over ortlite's, for sgemm ortlite's GFLOP/s over
onnxruntime's.

{md_table(report['rows'])}

Peak (sgemm row): {report['peak']['derivation']}.

## Choices

{CHOICES_BEGIN}
{choices}
{CHOICES_END}
"""
    for block in kept:
        text += "\n" + block + "\n"
    path.write_text(text)


def _display_path(p):
    try:
        return str(p.resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


# --- main --------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer and shorter repetitions")
    p.add_argument("--only", default=",".join(WORKLOADS),
                   help=f"comma-separated subset of: {','.join(WORKLOADS)}")
    p.add_argument("--threads", default="1,2", help="intra-op thread counts (default 1,2)")
    p.add_argument("--json", default=str(ROOT / "build" / "bench" / "bench.json"),
                   help="where to write the results (default build/bench/bench.json)")
    p.add_argument("--write-docs", action="store_true",
                   help="regenerate docs/performance.md from the results")
    a = p.parse_args(argv)
    a.only = [w.strip() for w in a.only.split(",") if w.strip()]
    bad = [w for w in a.only if w not in WORKLOADS]
    if bad or not a.only:
        p.error(f"--only: unknown workload {', '.join(bad) or '(none given)'}; "
                f"choose from {', '.join(WORKLOADS)}")
    try:
        a.threads = [int(t) for t in a.threads.split(",") if t.strip()]
    except ValueError:
        p.error(f"--threads: expected comma-separated integers, got {a.threads!r}")
    if not a.threads or any(t < 1 or t > 256 for t in a.threads):
        p.error(f"--threads: each count must be in 1..256, got {a.threads}")
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    command = " ".join(shlex.quote(x) for x in
                       ["python", os.path.relpath(__file__, Path.cwd())] + list(argv))
    print(f"command: {command}", flush=True)
    started = time.perf_counter_ns()
    st = Settings(args.quick)
    out_dir = ROOT / "build" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    mach, flags, lscpu, cpuinfo, cores = machine()
    peak = peak_flops(flags, lscpu, cpuinfo, cores)
    if "sgemm" in args.only:
        peak = measured_peak(flags, peak, out_dir) or peak

    jobs = {
        "tiny": lambda: latency_rows("tiny", bench_models.tiny, args.threads, st, out_dir, 3.0),
        "mlp": lambda: (
            latency_rows("mlp b1", lambda: bench_models.mlp(1), args.threads, st, out_dir, 1.2)
            + latency_rows("mlp b64", lambda: bench_models.mlp(64), args.threads, st, out_dir,
                           1.0)),
        "resnet18": lambda: latency_rows("resnet18", bench_models.resnet18, args.threads, st,
                                         out_dir, 1.1),
        "mobilenetv2": lambda: latency_rows("mobilenetv2", bench_models.mobilenetv2,
                                            args.threads, st, out_dir, 1.0),
        "bert": lambda: latency_rows("bert 2 layers", bench_models.bert, args.threads, st,
                                     out_dir, 1.2),
        "import": lambda: import_rows(st),
        "load": lambda: load_rows(st, out_dir),
        "rss": lambda: rss_rows(st, out_dir),
        "sgemm": lambda: sgemm_rows(args.threads, st, out_dir, peak),
    }
    rows, failed = [], False
    for w in WORKLOADS:
        if w not in args.only:
            continue
        t0 = time.perf_counter()
        try:
            new = jobs[w]()
        except Exception as e:  # noqa: BLE001 - one failing workload must not hide the others
            failed = True
            msg = f"{type(e).__name__}: {e}".replace("\n", " ")
            print(f"{w}: FAILED: {msg}", flush=True)
            new = [row(w, "-", None, None, None, None, error=msg)]
        for r in new:
            if not r.get("error"):
                print(f"{r['workload']} x{r['threads']}: ortlite {_fmt(r['ortlite'], r['unit'])}, "
                      f"onnxruntime {_fmt(r['onnxruntime'], r['unit'])}, ratio {r['ratio']:.2f}",
                      flush=True)
        print(f"  ({w}: {time.perf_counter() - t0:.1f} s)", flush=True)
        rows.extend(new)

    duration = (time.perf_counter_ns() - started) / 1e9
    print()
    print(text_table(rows))
    print(f"\npeak: {peak['derivation']}")
    print(f"total time: {duration:.1f} s")
    json_path = Path(args.json)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": duration,
        "settings": {"quick": st.quick, "reps": st.reps, "rep_seconds": st.rep_seconds,
                     "gap_seconds": st.gap_seconds,
                     "load_reps": st.load_reps, "import_reps": st.import_reps,
                     "rss_reps": st.rss_reps, "threads": args.threads,
                     "tolerance": {"rtol": RTOL, "atol": f"{ATOL_REL} * max|onnxruntime output|"}},
        "machine": mach,
        "peak": peak,
        "rows": rows,
        "json": _display_path(json_path),
    }
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {json_path}")
    if args.write_docs:
        doc = ROOT / "docs" / "performance.md"
        write_docs(report, doc)
        print(f"wrote {doc}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
