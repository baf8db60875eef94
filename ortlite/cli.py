"""The `ortlite` command (also `python -m ortlite`): look at, check, run, time and rewrite
ONNX models.

    ortlite info MODEL                 inputs, outputs, metadata, opsets, operators, weights
    ortlite check MODEL                every node without a kernel; exit 1 if there is one
    ortlite run MODEL [FEED ...]       run once on given or random inputs, summarize outputs
    ortlite bench MODEL [FEED ...]     time runs (optionally against onnxruntime)
    ortlite optimize MODEL OUT         write the model after ortlite's load-time rewrites

A FEED is `name=file.npy` or `file.npz` (arrays named by input); inputs not fed get random
data of their declared type, `--shape name=1,3,224,224` giving the shape where the model
leaves dimensions symbolic (unset symbolic dimensions are 1). `ortlite MODEL` is `info`.

Errors are one line on stderr and exit status 1 (2 for a usage error), never a traceback.
"""

import argparse
import os
import sys
import time
import zipfile

import numpy as np

import ortlite
from ortlite._progress import progress

COMMANDS = ("info", "check", "run", "bench", "optimize")

# Element types that random feeds can be made of.
_DTYPES = {
    "float": np.float32, "double": np.float64, "float16": np.float16,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "bool": np.bool_, "string": np.str_,
}
# Progress is shown for a feed file with at least this many arrays.
_MANY_FEEDS = 8


class CLIError(Exception):
    """A user error: printed as one line, exit status `code`."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


# --- models -----------------------------------------------------------------------------------


def _describe(path):
    return ortlite._ortlite._describe_model(os.fspath(path))


def _domain(d):
    return d or "ai.onnx"


def _node_labels(nodes):
    """(label, node) per node; the label as ortlite's errors write it."""
    seen = {}
    out = []
    for scope, name, domain, op, opset, problem in nodes:
        i = seen.get(scope, 0)
        seen[scope] = i + 1
        label = f"{op} node '{name}'" if name else f"{op} node #{i}"
        if scope:
            label += f" (in {scope})"
        out.append((label, (scope, name, domain, op, opset, problem)))
    return out


def _session_options(threads=None, level=None):
    so = ortlite.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    if level is not None:
        so.graph_optimization_level = level
    return so


def _session(model, threads=None):
    return ortlite.InferenceSession(os.fspath(model), _session_options(threads),
                                    providers=["CPUExecutionProvider"])


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _print_values(label, values, out):
    print(f"{label}:", file=out)
    if not values:
        print("  (none)", file=out)
    for name, type_, shape in values:
        print(f"  {name}: {type_} {shape}", file=out)


# --- info and check ---------------------------------------------------------------------------


def cmd_info(args, out):
    d = _describe(args.model)
    print(f"model: {args.model}", file=out)
    if d["producer_name"]:
        print(f"producer: {d['producer_name']} {d['producer_version']}".rstrip(), file=out)
    if d["graph_name"]:
        print(f"graph: {d['graph_name']}", file=out)
    print(f"ir_version: {d['ir_version']}", file=out)
    print("opsets: " + ", ".join(f"{_domain(dom)} {v}" for dom, v in d["opset_imports"]),
          file=out)
    _print_values("inputs", [(n, t, s) for n, t, s, init in d["inputs"] if not init], out)
    _print_values("outputs", [(n, t, s) for n, t, s, _ in d["outputs"]], out)
    overridable = [(n, t, s) for n, t, s, init in d["inputs"] if init]
    if overridable:
        _print_values("overridable initializers", overridable, out)
    for k, v in d["metadata"].items():
        print(f"metadata {k}: {v}", file=out)
    if d["functions"]:
        print("functions: " + ", ".join(f"{_domain(dom)}:{n}" for dom, n in d["functions"]),
              file=out)
    print(f"initializers: {d['initializers']} ({_fmt_bytes(d['initializer_bytes'])})", file=out)
    counts = {}
    for _, _, domain, op, _, _ in d["nodes"]:
        key = f"{_domain(domain)}:{op}"
        counts[key] = counts.get(key, 0) + 1
    print(f"operators ({len(d['nodes'])} nodes, subgraphs and functions included):", file=out)
    width = max([len(k) for k in counts] + [0])
    for key in sorted(counts, key=lambda k: (-counts[k], k)):
        print(f"  {key:<{width}}  {counts[key]}", file=out)
    missing = sum(1 for n in d["nodes"] if n[5])
    if missing:
        print(f"kernels: {missing} of {len(d['nodes'])} nodes have no kernel "
              "(`ortlite check` lists them)", file=out)
    else:
        print("kernels: every node has a CPU kernel", file=out)
    return 0


def cmd_check(args, out):
    d = _describe(args.model)
    problems = []
    for dom, version in d["opset_imports"]:
        if dom == "" and version > ortlite.NEWEST_OPSET:
            problems.append(f"opset import ai.onnx {version} is newer than ortlite's "
                            f"{ortlite.NEWEST_OPSET}")
    for label, (_, _, domain, _, opset, problem) in _node_labels(d["nodes"]):
        if problem:
            problems.append(f"{label} (domain {_domain(domain)}, opset {opset}): {problem}")
    if not problems:
        # Kernels check element types and attributes when they are created: only a
        # session says whether those are supported. Nothing is run.
        try:
            _session(args.model)
        except ortlite.OrtliteError as e:
            problems.append(f"{type(e).__name__}: {_one_line(e)}")
    n = len(d["nodes"])
    if problems:
        print(f"{args.model}: {len(problems)} problem(s) in {n} nodes", file=out)
        for p in problems:
            print(f"  {p}", file=out)
        return 1
    print(f"{args.model}: ok, every one of {n} nodes has a kernel "
          f"(opsets {', '.join(f'{_domain(dom)} {v}' for dom, v in d['opset_imports'])})",
          file=out)
    return 0


# --- feeds ------------------------------------------------------------------------------------


def _parse_shapes(specs, inputs):
    shapes = {}
    for spec in specs or ():
        name, sep, dims = spec.rpartition("=")
        if not sep or not name:
            raise CLIError(f"--shape {spec!r}: expected name=d0,d1,... (e.g. x=1,3,224,224)", 2)
        try:
            shape = tuple(int(v) for v in dims.split(",")) if dims.strip() else ()
        except ValueError:
            raise CLIError(f"--shape {spec!r}: dimensions must be integers", 2) from None
        if any(v < 0 for v in shape):
            raise CLIError(f"--shape {spec!r}: dimensions must not be negative", 2)
        if name not in inputs:
            raise CLIError(f"--shape {spec!r}: the model has no input {name!r} "
                           f"(inputs: {', '.join(inputs) or 'none'})", 2)
        declared = inputs[name].shape
        if declared is not None:
            if len(declared) != len(shape):
                raise CLIError(f"--shape {spec!r}: input {name!r} has rank {len(declared)} "
                               f"({declared})", 2)
            for i, (want, got) in enumerate(zip(declared, shape)):
                if isinstance(want, int) and want != got:
                    raise CLIError(f"--shape {spec!r}: dimension {i} of input {name!r} is "
                                   f"fixed at {want}", 2)
        shapes[name] = shape
    return shapes


def _load_array(path, what):
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except FileNotFoundError:
        raise CLIError(f"{what}: no such file: {path}") from None
    except OSError as e:
        raise CLIError(f"{what}: {_one_line(e)}") from None
    if magic != b"\x93NUMPY" and not magic.startswith(b"PK\x03\x04"):
        # np.load would call it pickled data.
        raise CLIError(f"{what}: {path} is not a .npy or .npz file")
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise CLIError(f"{what}: cannot read {path} as .npy/.npz: {_one_line(e)}") from None
    return arr


def _load_feeds(specs, inputs, quiet):
    feeds = {}

    def add(name, arr, what):
        if name not in inputs:
            raise CLIError(f"{what}: the model has no input {name!r} "
                           f"(inputs: {', '.join(inputs) or 'none'})")
        feeds[name] = arr

    for spec in specs or ():
        name, sep, path = spec.partition("=")
        if sep:
            if name not in inputs:
                raise CLIError(f"{spec}: the model has no input {name!r} "
                               f"(inputs: {', '.join(inputs) or 'none'})")
            arr = _load_array(path, spec)
            if isinstance(arr, np.lib.npyio.NpzFile):
                arr.close()
                raise CLIError(f"{spec}: {path} is an .npz; give it without a name")
            add(name, arr, spec)
            continue
        if not spec.endswith(".npz"):
            raise CLIError(f"feed {spec!r}: expected name=file.npy or file.npz")
        npz = _load_array(spec, spec)
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise CLIError(f"feed {spec!r}: not an .npz archive")
        with npz:
            names = list(npz.files)
            bar = progress(len(names), f"loading {os.path.basename(spec)}", "arrays") \
                if len(names) >= _MANY_FEEDS and not quiet else None
            for name in names:
                try:
                    arr = npz[name]
                except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
                    raise CLIError(f"{spec}: array {name!r}: {_one_line(e)}") from None
                add(name, arr, spec)
                if bar:
                    bar.update()
            if bar:
                bar.close()
    return feeds


def _random_feed(arg, shape, rng):
    t = arg.type
    if not (t.startswith("tensor(") and t.endswith(")")) or t[7:-1] not in _DTYPES:
        raise CLIError(f"input {arg.name!r} is {t}: random data is made only for tensors of "
                       f"{', '.join(sorted(_DTYPES))}; give it as {arg.name}=file.npy")
    dtype = _DTYPES[t[7:-1]]
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype is np.str_:
        return np.full(shape, "a", dtype=object)
    # Small non-negative integers: valid as indices, counts and token ids in most models.
    return rng.integers(0, 4, shape).astype(dtype)


def _feeds(args, sess, err):
    inputs = {a.name: a for a in sess.get_inputs()}
    known = dict(inputs)
    for a in sess.get_overridable_initializers():
        known.setdefault(a.name, a)
    shapes = _parse_shapes(args.shape, known)
    feeds = _load_feeds(args.feeds, known, args.quiet)
    rng = np.random.default_rng(args.seed)
    for name, arg in inputs.items():
        if name in feeds:
            continue
        if name in shapes:
            shape = shapes[name]
        elif arg.shape is None:
            raise CLIError(f"input {name!r} has no declared shape: give --shape {name}=...", 2)
        else:
            free = [d for d in arg.shape if not isinstance(d, int)]
            shape = tuple(d if isinstance(d, int) else 1 for d in arg.shape)
            if free and not args.quiet:
                print(f"note: input {name!r} {arg.shape}: symbolic dimensions set to 1 "
                      f"(--shape {name}=... sets them)", file=err)
        feeds[name] = _random_feed(arg, shape, rng)
    return feeds


# --- run --------------------------------------------------------------------------------------


def _summary(name, arr):
    arr = np.asarray(arr)
    head = f"{name}: shape {tuple(arr.shape)} {arr.dtype}"
    if arr.size == 0:
        return head + " (empty)"
    if arr.dtype.kind in "biuf":
        values = arr.astype(np.float64) if arr.dtype.kind == "b" else arr
        with np.errstate(all="ignore"):
            return (head + f" min {values.min():.6g} max {values.max():.6g} "
                    f"mean {values.astype(np.float64).mean():.6g}")
    return head


def _save(path, names, arrays):
    try:
        np.savez(path, **dict(zip(names, arrays)))
    except OSError as e:
        raise CLIError(f"--output {path}: {_one_line(e)}") from None


def cmd_run(args, out, err):
    sess = _session(args.model, args.threads)
    feeds = _feeds(args, sess, err)
    names = [o.name for o in sess.get_outputs()]
    bar = progress(args.repeat, "run", "runs", stream=err) if args.repeat > 1 and not args.quiet \
        else None
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        results = sess.run(names, feeds)
        times.append(time.perf_counter() - t0)
        if bar:
            bar.update()
    if bar:
        bar.close()
    for name, arr in zip(names, results):
        print(_summary(name, arr), file=out)
    if args.repeat > 1:
        print(f"{args.repeat} runs: mean {1e3 * sum(times) / len(times):.3f} ms", file=out)
    if args.output:
        _save(args.output, names, results)
        print(f"wrote {args.output}", file=out)
    return 0


# --- bench ------------------------------------------------------------------------------------


def _import_onnxruntime():
    try:
        import onnxruntime
    except Exception as e:  # ImportError, or a broken install
        raise CLIError(f"--compare onnxruntime: onnxruntime cannot be imported ({_one_line(e)}); "
                       "pip install onnxruntime", 2) from None
    return onnxruntime


def _ms(v):
    return f"{v:.0f}" if v >= 1e4 else f"{v:.4g}"


def _stats(times):
    ms = np.asarray(times) * 1e3
    return {"mean": float(ms.mean()), "p50": float(np.percentile(ms, 50)),
            "p90": float(np.percentile(ms, 90)), "p99": float(np.percentile(ms, 99))}


def cmd_bench(args, out, err):
    ort = _import_onnxruntime() if args.compare else None
    sess = _session(args.model, args.threads)
    feeds = _feeds(args, sess, err)
    runners = [("ortlite", lambda: sess.run(None, feeds))]
    if ort is not None:
        so = ort.SessionOptions()
        if args.threads:
            so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        try:
            osess = ort.InferenceSession(os.fspath(args.model), so,
                                         providers=["CPUExecutionProvider"])
            osess.run(None, feeds)
        except Exception as e:
            raise CLIError(f"onnxruntime: {_one_line(e)}") from None
        runners.append(("onnxruntime", lambda: osess.run(None, feeds)))
    times = {name: [] for name, _ in runners}
    total = (args.warmup + args.runs) * len(runners)
    bar = None if args.quiet else progress(total, "bench", "runs", stream=err)
    for i in range(args.warmup + args.runs):
        # Interleaved, the order alternating: drift (clock, heat, other load) hits both alike.
        order = runners if i % 2 == 0 else runners[::-1]
        for name, fn in order:
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            if i >= args.warmup:
                times[name].append(dt)
            if bar:
                bar.update()
    if bar:
        bar.close()
    threads = args.threads or "default"
    print(f"{args.model}: {args.runs} runs after {args.warmup} warm-up, threads {threads}",
          file=out)
    print(f"{'runtime':<12} {'mean ms':>10} {'p50 ms':>10} {'p90 ms':>10} {'p99 ms':>10}",
          file=out)
    stats = {name: _stats(t) for name, t in times.items()}
    for name, s in stats.items():
        print(f"{name:<12} " + " ".join(f"{_ms(s[k]):>10}" for k in ("mean", "p50", "p90", "p99")),
              file=out)
    if ort is not None:
        a, b = stats["ortlite"], stats["onnxruntime"]
        print(f"onnxruntime/ortlite: {b['mean'] / a['mean']:.2f}x (mean), "
              f"{b['p50'] / a['p50']:.2f}x (p50)", file=out)
    return 0


# --- optimize ---------------------------------------------------------------------------------

_LEVELS = {"disable": 0, "basic": 1, "extended": 2, "all": 99}


def _stat(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def cmd_optimize(args, out):
    if os.path.exists(args.out) and os.path.samefile(args.out, args.model):
        raise CLIError(f"OUT {args.out} is the model itself", 2)
    if os.path.isdir(args.out):
        raise CLIError(f"OUT {args.out} is a directory", 2)
    before = _stat(args.out)
    so = _session_options(args.threads, _LEVELS[args.level])
    try:
        so.optimized_model_filepath = os.fspath(args.out)
    except AttributeError:
        raise CLIError("this ortlite build does not write optimized models", 2) from None
    ortlite.InferenceSession(os.fspath(args.model), so, providers=["CPUExecutionProvider"])
    after = _stat(args.out)
    if after is None or after == before:
        raise CLIError("this ortlite build does not write optimized models", 2)
    print(f"wrote {args.out} ({_fmt_bytes(after[1])}, level {args.level})", file=out)
    return 0


# --- the command line -------------------------------------------------------------------------


def _one_line(e):
    return " ".join(str(e).split()) or type(e).__name__


def _positive(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {v}")
    return v


def _count(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {v}")
    return v


def parser():
    p = argparse.ArgumentParser(prog="ortlite", description=__doc__.split("\n\n")[0],
                                epilog="`ortlite COMMAND -h` describes a command.")
    p.add_argument("--version", action="version", version=f"ortlite {ortlite.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def model_arg(sp):
        sp.add_argument("model", metavar="MODEL", help="an .onnx file")

    info = sub.add_parser("info", help="inputs, outputs, metadata, opsets, operators, weights")
    model_arg(info)
    check = sub.add_parser("check", help="list nodes without a kernel (runs nothing)")
    model_arg(check)

    def feeds_args(sp):
        model_arg(sp)
        sp.add_argument("feeds", metavar="FEED", nargs="*",
                        help="name=file.npy or file.npz; inputs not given get random data")
        sp.add_argument("--shape", action="append", metavar="NAME=D0,D1,...",
                        help="the shape of a random input (for its symbolic dimensions)")
        sp.add_argument("--seed", type=int, default=0, help="of the random inputs (default 0)")
        sp.add_argument("--threads", type=_positive, help="intra_op_num_threads")
        sp.add_argument("-q", "--quiet", action="store_true", help="no progress or notes")

    run = sub.add_parser("run", help="run once and summarize the outputs")
    feeds_args(run)
    run.add_argument("--output", metavar="OUT.npz", help="write the outputs here")
    run.add_argument("--repeat", type=_positive, default=1, help="run this many times")

    bench = sub.add_parser("bench", help="time runs; --compare onnxruntime for the ratio")
    feeds_args(bench)
    bench.add_argument("--warmup", type=_count, default=10, help="untimed runs first (10)")
    bench.add_argument("--runs", type=_positive, default=100, help="timed runs (100)")
    bench.add_argument("--compare", choices=["onnxruntime"],
                       help="also time onnxruntime, interleaved with ortlite")

    opt = sub.add_parser("optimize", help="write the model after ortlite's load-time rewrites")
    model_arg(opt)
    opt.add_argument("out", metavar="OUT", help="the .onnx file to write")
    opt.add_argument("--level", choices=list(_LEVELS), default="all",
                     help="graph_optimization_level (default all)")
    opt.add_argument("--threads", type=_positive, help=argparse.SUPPRESS)
    return p


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    # `ortlite MODEL` (the command's first form) is `ortlite info MODEL`.
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        argv.insert(0, "info")
    args = parser().parse_args(argv)
    try:
        if args.command == "info":
            return cmd_info(args, out)
        if args.command == "check":
            return cmd_check(args, out)
        if args.command == "run":
            return cmd_run(args, out, err)
        if args.command == "bench":
            return cmd_bench(args, out, err)
        return cmd_optimize(args, out)
    except CLIError as e:
        print(f"ortlite {args.command}: error: {e}", file=err)
        return e.code
    except (ortlite.OrtliteError, OSError, ValueError, TypeError, MemoryError) as e:
        # Errors of ortlite and of the files named: the message names what is wrong.
        print(f"ortlite {args.command}: error: {_one_line(e)}", file=err)
        return 1
    except KeyboardInterrupt:
        print(f"ortlite {args.command}: interrupted", file=err)
        return 130


if __name__ == "__main__":
    sys.exit(main())
