"""The `ortlite` command (ortlite/cli.py), driven as a user drives it: `python -m ortlite`
in a child process, on small models written to tmp_path."""

import os
import pty
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import ROOT, make_model, run_ort, subprocess_env


def cli(*args, env=None, stderr=subprocess.PIPE, timeout=120):
    return subprocess.run([sys.executable, "-m", "ortlite", *map(str, args)],
                          stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=timeout,
                          env=env or subprocess_env(), cwd=os.path.dirname(ROOT))


def assert_one_line_error(proc, *fragments, code=None):
    assert proc.returncode != 0, proc.stdout
    if code is not None:
        assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def save(model, path):
    onnx.save(model, str(path))
    return path


def mlp(tmp_path):
    """x [N, 4] -> MatMul(w) -> Add(b) -> Relu -> y [N, 3], with metadata."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                    helper.make_node("Add", ["h", "b"], ["a"], name="add"),
                    helper.make_node("Relu", ["a"], ["y"], name="relu")],
                   [("x", np.float32, ["N", 4])], [("y", np.float32, ["N", 3])], [w, b])
    helper.set_model_props(m, {"author": "me"})
    m.producer_name = "cli-test"
    return save(m, tmp_path / "mlp.onnx")


def two_inputs(tmp_path):
    m = make_model([helper.make_node("Mul", ["x", "s"], ["m"]),
                    helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
                    helper.make_node("Add", ["m", "kf"], ["y"])],
                   [("x", np.float32, [2, 3]), ("s", np.float32, [1]), ("k", np.int64, [2, 3])],
                   [("y", np.float32, [2, 3])])
    return save(m, tmp_path / "two.onnx")


def unsupported(tmp_path):
    """An op no registry has, and a default-domain op at an opset before its introduction."""
    sub = helper.make_graph([helper.make_node("Neg", ["x"], ["t"], name="neg")], "then", [],
                            [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    m = make_model([helper.make_node("Frobnicate", ["x"], ["f"], name="frob", domain="my.ops"),
                    helper.make_node("Gelu", ["x"], ["g"], name="gelu"),
                    helper.make_node("If", ["c"], ["y"], name="branch", then_branch=sub,
                                     else_branch=sub)],
                   [("x", np.float32, [2]), ("c", np.bool_, [])],
                   [("f", np.float32, [2]), ("g", np.float32, [2]), ("y", np.float32, [2])],
                   opset=17, extra_opsets=[("my.ops", 1)])
    return save(m, tmp_path / "unsupported.onnx")


# --- info and check ---------------------------------------------------------------------------


def test_info_prints_the_model(tmp_path):
    out = cli("info", mlp(tmp_path))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for line in ("producer: cli-test", "opsets: ai.onnx 17", "  x: tensor(float) ['N', 4]",
                 "  y: tensor(float) ['N', 3]", "metadata author: me",
                 "initializers: 2 (60 B)", "operators (3 nodes, subgraphs and functions included):",
                 "kernels: every node has a CPU kernel"):
        assert line in text, (line, text)
    histogram = [ln.split() for ln in text.splitlines() if ln.startswith("  ai.onnx:")]
    assert histogram == [["ai.onnx:Add", "1"], ["ai.onnx:MatMul", "1"], ["ai.onnx:Relu", "1"]]
    # `ortlite MODEL` is `ortlite info MODEL`.
    assert cli(mlp(tmp_path)).stdout == text


def test_info_counts_subgraph_nodes_and_missing_kernels(tmp_path):
    out = cli("info", unsupported(tmp_path))
    assert out.returncode == 0, out.stderr
    histogram = dict(ln.split() for ln in out.stdout.splitlines() if ln.startswith("  ") and
                     ":" in ln and len(ln.split()) == 2)
    assert histogram["ai.onnx:Neg"] == "2"  # both If branches
    assert histogram["my.ops:Frobnicate"] == "1" and histogram["ai.onnx:Gelu"] == "1"
    assert "kernels: 2 of 5 nodes have no kernel" in out.stdout


def test_check_passes_a_supported_model(tmp_path):
    out = cli("check", mlp(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "ok, every one of 3 nodes has a kernel" in out.stdout


def test_check_lists_every_unsupported_node_and_fails(tmp_path):
    out = cli("check", unsupported(tmp_path))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert "2 problem(s) in 5 nodes" in lines[0]
    assert ("  Frobnicate node 'frob' (domain my.ops, opset 1): the operator is not implemented"
            in lines)
    assert "  Gelu node 'gelu' (domain ai.onnx, opset 17): this opset version is not supported" \
        in lines


def test_check_reports_what_only_a_session_finds(tmp_path):
    # Every op has a kernel, but the graph reads a value nothing produces.
    m = make_model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")],
                   [("x", np.float32, [2])], [("y", np.float32, [2])])
    out = cli("check", save(m, tmp_path / "m.onnx"))
    assert out.returncode == 1
    assert "InvalidGraph" in out.stdout and "nowhere" in out.stdout


# --- run --------------------------------------------------------------------------------------


def test_run_with_npy_feeds_matches_onnxruntime(tmp_path):
    path = two_inputs(tmp_path)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32),
             "s": np.array([2.5], np.float32), "k": np.arange(6, dtype=np.int64).reshape(2, 3)}
    args = []
    for name, arr in feeds.items():
        np.save(tmp_path / f"{name}.npy", arr)
        args.append(f"{name}={tmp_path / name}.npy")
    out = cli("run", path, *args, "--output", tmp_path / "out.npz")
    assert out.returncode == 0, out.stderr
    (expected,) = run_ort(onnx.load(str(path)), feeds)
    with np.load(tmp_path / "out.npz") as got:
        assert list(got.files) == ["y"]
        np.testing.assert_allclose(got["y"], expected, rtol=1e-6)
    summary = out.stdout.splitlines()[0]
    assert summary.startswith("y: shape (2, 3) float32 min ")
    assert f"max {expected.max():.6g}" in summary and f"mean {expected.mean():.6g}" in summary


def test_run_with_an_npz_and_random_inputs(tmp_path):
    path = mlp(tmp_path)
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    np.savez(tmp_path / "feeds.npz", x=x)
    out = cli("run", path, tmp_path / "feeds.npz", "--output", tmp_path / "out.npz")
    assert out.returncode == 0, out.stderr
    (expected,) = run_ort(onnx.load(str(path)), {"x": x})
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_allclose(got["y"], expected, rtol=1e-5, atol=1e-6)

    # Random data: --shape sets the symbolic dims; the same seed gives the same outputs.
    a = cli("run", path, "--shape", "x=7,4", "--output", tmp_path / "a.npz")
    b = cli("run", path, "--shape", "x=7,4", "--output", tmp_path / "b.npz")
    assert a.returncode == 0 and "y: shape (7, 3) float32" in a.stdout, a.stderr
    with np.load(tmp_path / "a.npz") as ga, np.load(tmp_path / "b.npz") as gb:
        np.testing.assert_array_equal(ga["y"], gb["y"])
    # Without --shape, symbolic dims are 1, with a note.
    c = cli("run", path)
    assert c.returncode == 0 and "y: shape (1, 3)" in c.stdout
    assert "symbolic dimensions set to 1" in c.stderr


@pytest.mark.parametrize("case", ["missing model", "bad model", "shape not ints",
                                  "shape unknown input", "shape wrong rank", "shape fixed dim",
                                  "shape no name", "unknown input", "npz unknown input",
                                  "bad npy", "truncated npy", "missing npy", "wrong dtype"])
def test_run_errors_are_one_line(tmp_path, case):
    path = mlp(tmp_path)
    np.save(tmp_path / "x.npy", np.ones((2, 4), np.float32))
    (tmp_path / "bad.npy").write_bytes(b"not an array at all")
    (tmp_path / "short.npy").write_bytes((tmp_path / "x.npy").read_bytes()[:90])
    (tmp_path / "bad.onnx").write_bytes(b"\xff\xff\xff\xff garbage")
    np.savez(tmp_path / "other.npz", z=np.ones(2))
    np.save(tmp_path / "x64.npy", np.ones((2, 4), np.float64))
    args, fragments, code = {
        "missing model": ([tmp_path / "nope.onnx"], ["nope.onnx", "does not exist"], 1),
        "bad model": ([tmp_path / "bad.onnx"], ["bad.onnx", "protobuf"], 1),
        "shape not ints": ([path, "--shape", "x=2,a"], ["--shape", "integers"], 2),
        "shape unknown input": ([path, "--shape", "q=2,4"], ["no input 'q'", "inputs: x"], 2),
        "shape wrong rank": ([path, "--shape", "x=2"], ["rank 2"], 2),
        "shape fixed dim": ([path, "--shape", "x=2,5"], ["dimension 1", "fixed at 4"], 2),
        "shape no name": ([path, "--shape", "2,4"], ["name=d0,d1"], 2),
        "unknown input": ([path, f"q={tmp_path / 'x.npy'}"], ["no input 'q'"], 1),
        "npz unknown input": ([path, tmp_path / "other.npz"], ["no input 'z'"], 1),
        "bad npy": ([path, f"x={tmp_path / 'bad.npy'}"], ["not a .npy or .npz file"], 1),
        "truncated npy": ([path, f"x={tmp_path / 'short.npy'}"], ["short.npy", "EOF"], 1),
        "missing npy": ([path, f"x={tmp_path / 'gone.npy'}"], ["no such file", "gone.npy"], 1),
        "wrong dtype": ([path, f"x={tmp_path / 'x64.npy'}"], ["tensor(double)", "'x'"], 1),
    }[case]
    out = cli("run", *args)
    assert_one_line_error(out, "ortlite run: error:", *fragments, code=code)


def test_usage_errors_come_from_argparse(tmp_path):
    for args in (["run"], ["bench", mlp(tmp_path), "--runs", "0"], ["optimize", mlp(tmp_path)],
                 ["bench", mlp(tmp_path), "--compare", "tensorflow"], ["frobnicate", "--x"]):
        out = cli(*args)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr


# --- progress ---------------------------------------------------------------------------------


def many_inputs(tmp_path, n=10):
    nodes, inputs = [], []
    for i in range(n):
        inputs.append((f"x{i}", np.float32, [3]))
    acc = "x0"
    for i in range(1, n):
        nodes.append(helper.make_node("Add", [acc, f"x{i}"], [f"s{i}"]))
        acc = f"s{i}"
    nodes.append(helper.make_node("Identity", [acc], ["y"]))
    path = save(make_model(nodes, inputs, [("y", np.float32, [3])]), tmp_path / "many.onnx")
    np.savez(tmp_path / "many.npz", **{f"x{i}": np.full(3, i, np.float32) for i in range(n)})
    return path


def test_without_a_terminal_progress_is_plain_lines(tmp_path):
    path = many_inputs(tmp_path)
    out = cli("run", path, tmp_path / "many.npz", "--repeat", "20")
    assert out.returncode == 0, out.stderr
    assert "y: shape (3,) float32 min 45 max 45 mean 45" in out.stdout
    assert "20 runs: mean" in out.stdout
    lines = out.stderr.splitlines()
    assert "loading many.npz: 10/10 arrays" in lines[-3] and "run: 20/20 runs" in lines[-1]
    assert "\r" not in out.stderr
    quiet = cli("run", path, tmp_path / "many.npz", "--repeat", "20", "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""


FAKE_TQDM = '''
import sys
class tqdm:
    def __init__(self, total=None, desc=None, unit=None, file=None, leave=True):
        self.file, self.desc, self.n, self.total = file, desc, 0, total
    def update(self, n=1):
        self.n += n
    def close(self):
        print(f"FAKE-TQDM {self.desc} {self.n}/{self.total}", file=self.file)
'''


def run_on_a_terminal(args, pythonpath):
    """`ortlite ARGS` with its stderr on a pseudo-terminal; returns (rc, stderr text)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "ortlite", *map(str, args)],
                                stdout=subprocess.DEVNULL, stderr=slave,
                                env=subprocess_env(PYTHONPATH=str(pythonpath)))
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        return proc.wait(timeout=60), b"".join(chunks).decode().replace("\r\n", "\n")
    finally:
        os.close(master)


def test_on_a_terminal_progress_uses_tqdm_when_installed(tmp_path):
    path = mlp(tmp_path)
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "tqdm.py").write_text(FAKE_TQDM)
    rc, text = run_on_a_terminal(["bench", path, "--warmup", "2", "--runs", "5"], fake)
    assert rc == 0, text
    assert "FAKE-TQDM bench 7/7" in text


def test_on_a_terminal_without_tqdm_progress_is_plain_lines(tmp_path):
    path = mlp(tmp_path)
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "tqdm.py").write_text("raise ImportError('no tqdm here')\n")
    rc, text = run_on_a_terminal(["bench", path, "--warmup", "2", "--runs", "5"], fake)
    assert rc == 0, text
    assert "bench: 7/7 runs" in text and "Traceback" not in text


# --- bench ------------------------------------------------------------------------------------


def test_bench_prints_percentiles(tmp_path):
    out = cli("bench", mlp(tmp_path), "--warmup", "2", "--runs", "20", "--threads", "1",
              "--shape", "x=8,4")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "20 runs after 2 warm-up, threads 1" in lines[0]
    assert lines[1].split() == ["runtime", "mean", "ms", "p50", "ms", "p90", "ms", "p99", "ms"]
    row = lines[2].split()
    assert row[0] == "ortlite" and len(row) == 5
    mean, p50, p90, p99 = map(float, row[1:])
    assert 0 < p50 <= p90 <= p99


def test_bench_compares_with_onnxruntime(tmp_path):
    out = cli("bench", mlp(tmp_path), "--warmup", "2", "--runs", "20", "--compare", "onnxruntime")
    assert out.returncode == 0, out.stderr
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.stdout.splitlines()[2:4]}
    assert set(rows) == {"ortlite", "onnxruntime"}
    ratio = [ln for ln in out.stdout.splitlines() if ln.startswith("onnxruntime/ortlite: ")]
    assert len(ratio) == 1
    want = float(rows["onnxruntime"][0]) / float(rows["ortlite"][0])
    got = float(ratio[0].split()[1].rstrip("x"))
    assert got == pytest.approx(want, rel=0.05, abs=0.01)


def test_bench_compare_without_onnxruntime_is_one_line(tmp_path):
    hide = tmp_path / "hide"
    (hide / "onnxruntime").mkdir(parents=True)
    (hide / "onnxruntime" / "__init__.py").write_text("raise ImportError('not here')\n")
    out = cli("bench", mlp(tmp_path), "--compare", "onnxruntime",
              env=subprocess_env(PYTHONPATH=str(hide)))
    assert_one_line_error(out, "onnxruntime cannot be imported", "pip install onnxruntime",
                          code=2)


# --- optimize ---------------------------------------------------------------------------------


def test_optimize_arguments(tmp_path):
    path = mlp(tmp_path)
    assert_one_line_error(cli("optimize", path, path), "is the model itself", code=2)
    assert_one_line_error(cli("optimize", path, tmp_path), "is a directory", code=2)
    assert_one_line_error(cli("optimize", tmp_path / "nope.onnx", tmp_path / "o.onnx"),
                          "does not exist", code=1)
    assert cli("optimize", path, tmp_path / "o.onnx", "--level", "most").returncode == 2


def test_optimize_writes_a_model_that_runs_the_same(tmp_path):
    path = mlp(tmp_path)
    opt = tmp_path / "opt.onnx"
    out = cli("optimize", path, opt)
    if out.returncode == 2 and not opt.exists():
        assert_one_line_error(out, "this ortlite build does not write optimized models")
        pytest.skip("this ortlite build does not write optimized models")
    assert out.returncode == 0, out.stderr
    assert f"wrote {opt}" in out.stdout
    x = np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32)
    (expected,) = run_ort(onnx.load(str(path)), {"x": x})
    np.save(tmp_path / "x.npy", x)
    ran = cli("run", opt, f"x={tmp_path / 'x.npy'}", "--output", tmp_path / "out.npz")
    assert ran.returncode == 0, ran.stderr
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_allclose(got["y"], expected, rtol=1e-5, atol=1e-6)


# --- packaging --------------------------------------------------------------------------------


def test_console_script_is_the_cli():
    import tomllib

    path = os.path.join(ROOT, "pyproject.toml")
    if not os.path.exists(path):
        pytest.skip("reads the source tree's pyproject.toml")
    with open(path, "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["scripts"] == {"ortlite": "ortlite.cli:main"}
    assert all(not d.startswith("tqdm") for d in project["dependencies"])
    assert [d for d in project["optional-dependencies"]["cli"] if d.startswith("tqdm")]
