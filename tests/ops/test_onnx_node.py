"""ONNX node conformance: every node test case shipped in the pinned onnx wheel
(onnx/backend/test/data/node) runs through ortlite.InferenceSession and is compared with
its expected outputs the way onnx's backend runner compares them (tools/conformance.py).

tests/onnx_node_pass.txt lists the cases ortlite passes: one of them failing is a
regression and fails the test; a case passing that is not on the list is reported (run
`python tools/conformance.py --update` to add it). Also tests ortlite.backend, the
onnx.backend.base.Backend implementation, including under onnx's own backend test runner.
"""

import os
import subprocess
import sys
import unittest
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ortlite
from helpers import ROOT, add_model

sys.path.insert(0, os.path.join(ROOT, "tools"))
import conformance  # noqa: E402

import ortlite.backend as backend  # noqa: E402

WORKERS = 2
CASE_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def node_results():
    return conformance.run_cases(conformance.list_cases(), workers=WORKERS,
                                 timeout=CASE_TIMEOUT_S)


def test_onnx_wheel_ships_the_node_cases():
    cases = conformance.list_cases()
    assert len(cases) > 1000, len(cases)
    d = conformance.node_dir()
    for name in cases[:50]:
        ds = os.path.join(d, name, "test_data_set_0")
        assert os.path.isdir(ds), name
        assert any(f.startswith("output_") for f in os.listdir(ds)), name


def test_pass_list_names_existing_cases_once():
    listed = conformance.read_pass_list()
    assert listed, "tests/onnx_node_pass.txt is empty"
    assert len(listed) == len(set(listed)), "duplicates in tests/onnx_node_pass.txt"
    unknown = sorted(set(listed) - set(conformance.list_cases()))
    assert not unknown, f"tests/onnx_node_pass.txt names cases onnx does not ship: {unknown}"


def test_node_conformance_no_regressions(node_results):
    listed = conformance.read_pass_list()
    regressed, new = conformance.compare_with_pass_list(node_results, listed)
    # A worker that crashed or timed out may have been starved by a loaded machine: such a
    # case gets a second chance, alone, in a fresh worker.
    again = [c for c in regressed if node_results[c]["kind"] in ("crash", "timeout")]
    if again:
        node_results.update(conformance.run_cases(again, workers=1,
                                                  timeout=2 * CASE_TIMEOUT_S))
        regressed, new = conformance.compare_with_pass_list(node_results, listed)
    passed = sum(r["status"] == "pass" for r in node_results.values())
    print(f"\nONNX node conformance: {passed} of {len(node_results)} cases pass")
    if new:
        msg = (f"{len(new)} node cases pass that tests/onnx_node_pass.txt does not list "
               f"(run python tools/conformance.py --update): {new}")
        print(msg)
        warnings.warn(msg, stacklevel=1)
    details = "\n".join(f"  {c} [{node_results[c]['op']}] {node_results[c]['kind']}: "
                        f"{node_results[c]['error'][:300]}" for c in regressed)
    assert not regressed, f"{len(regressed)} listed node cases fail:\n{details}"


def test_compare_with_pass_list():
    res = {"a": {"status": "pass"}, "b": {"status": "fail"}, "c": {"status": "pass"}}
    assert conformance.compare_with_pass_list(res, ["a", "b", "d"]) == (["b", "d"], ["c"])


def test_harness_records_a_crash_and_goes_on(tmp_path):
    # A "python" that dies on its first case: every case must come back failed(crash), and
    # the run must still finish.
    fake = tmp_path / "fake_python"
    fake.write_text("#!/bin/sh\nread line\nexit 3\n")
    fake.chmod(0o755)
    res = conformance.run_cases(["test_abs", "test_relu"], workers=1, timeout=20,
                                python=str(fake))
    assert {r["kind"] for r in res.values()} == {"crash"}
    assert "exit status 3" in res["test_abs"]["error"]
    assert res["test_abs"]["op"] == "Abs"


def test_harness_records_a_timeout(tmp_path):
    fake = tmp_path / "fake_python"
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(0o755)
    res = conformance.run_cases(["test_abs"], workers=1, timeout=0.5, python=str(fake))
    assert res["test_abs"]["status"] == "fail"
    assert res["test_abs"]["kind"] == "timeout"


def _fake_case(tmp_path, op, x, expected, attrs=None, opset=17, domain="", declared=None):
    """A node-test-style case directory: model.onnx + test_data_set_0/{input,output}_0.pb.
    The model declares the output's type as `declared`, default the expected one's."""
    out_type = helper.np_dtype_to_tensor_dtype(np.dtype(declared or expected.dtype))
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node(op, ["x"], ["y"], domain=domain, **(attrs or {}))], "g",
            [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype),
                                           list(x.shape))],
            [helper.make_tensor_value_info("y", out_type, list(expected.shape))]),
        opset_imports=[helper.make_opsetid("", opset)]
        + ([helper.make_opsetid(domain, 1)] if domain else []), ir_version=8)
    d = tmp_path / f"test_fake_{op.lower()}"
    (d / "test_data_set_0").mkdir(parents=True)
    onnx.save(model, str(d / "model.onnx"))
    onnx.save_tensor(onnx.numpy_helper.from_array(x), str(d / "test_data_set_0" / "input_0.pb"))
    onnx.save_tensor(onnx.numpy_helper.from_array(expected),
                     str(d / "test_data_set_0" / "output_0.pb"))
    return str(d)


def test_run_case_pass_mismatch_dtype_shape_and_load_failures(tmp_path):
    x = np.array([-1.0, 2.0, -3.0], np.float32)
    ok = conformance.run_case("fake", _fake_case(tmp_path / "ok", "Abs", x, np.abs(x)))
    assert ok["status"] == "pass" and ok["op"] == "Abs", ok
    # Off by more than rtol=1e-3.
    bad = conformance.run_case("fake", _fake_case(tmp_path / "bad", "Abs", x,
                                                  np.abs(x) * np.float32(1.01)))
    assert (bad["status"], bad["kind"]) == ("fail", "mismatch"), bad
    # Within rtol=1e-3: passes, as in onnx's runner.
    close = conformance.run_case("fake", _fake_case(tmp_path / "close", "Abs", x,
                                                    np.abs(x) * np.float32(1.0005)))
    assert close["status"] == "pass", close
    dt = conformance.run_case("fake", _fake_case(tmp_path / "dt", "Abs", x,
                                                 np.abs(x).astype(np.float64),
                                                 declared=np.float32))
    assert (dt["status"], dt["kind"]) == ("fail", "mismatch") and "dtype" in dt["error"], dt
    sh = conformance.run_case("fake", _fake_case(tmp_path / "sh", "Abs", x,
                                                 np.abs(x).reshape(1, 3)))
    assert (sh["status"], sh["kind"]) == ("fail", "mismatch") and "shape" in sh["error"], sh
    ld = conformance.run_case("fake", _fake_case(tmp_path / "ld", "NoSuchOp", x, x,
                                                 domain="example.com"))
    assert (ld["status"], ld["kind"]) == ("fail", "load"), ld
    assert "NotImplemented" in ld["error"]


def test_node_case_operator_grouping(node_results):
    assert node_results["test_abs"]["op"] == "Abs"
    assert node_results["test_softmax_axis_0_expanded"]["op"] == "Softmax"
    assert node_results["test_relu_expanded_ver18"]["op"] == "Relu"


# --------------------------------------------------------------------------------------
# ortlite.backend


def test_import_ortlite_does_not_import_onnx():
    code = "import sys, ortlite; assert 'onnx' not in sys.modules, 'onnx imported'"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


def test_backend_prepare_and_run_list_dict_bytes_path(tmp_path):
    model = add_model(inputs=("a", "b"), output="c", ir_version=8, serialize=False)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 0.5, np.float32)
    rep = backend.prepare(model)
    out = rep.run([a, b])
    np.testing.assert_array_equal(out[0], a + b)
    np.testing.assert_array_equal(out["c"], a + b)
    np.testing.assert_array_equal(out.c, a + b)
    np.testing.assert_array_equal(rep.run({"a": a, "b": b})[0], a + b)
    np.testing.assert_array_equal(backend.prepare(model.SerializeToString()).run([a, b])[0],
                                  a + b)
    path = tmp_path / "add.onnx"
    onnx.save(model, str(path))
    np.testing.assert_array_equal(backend.run_model(str(path), [a, b])[0], a + b)
    np.testing.assert_array_equal(backend.run_model(model, {"a": a, "b": b})[0], a + b)
    with pytest.raises(ortlite.InvalidArgument):
        rep.run([a, b, b])
    with pytest.raises(ortlite.InvalidArgument):
        rep.run(a)  # two inputs needed


def test_backend_run_node():
    x = np.array([[-1.5, 0.0, 2.0]], np.float32)
    (y,) = backend.run_node(helper.make_node("Relu", ["x"], ["y"]), [x])
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    (y,) = backend.run_node(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32), [x],
                            outputs_info=[(np.int32, (1, 3))], opset_version=13)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, x.astype(np.int32))
    with pytest.raises(ortlite.InvalidArgument):
        backend.run_node(helper.make_node("Add", ["x", "z"], ["y"]), [x])


def test_backend_unsupported_op_is_not_implemented():
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("NoSuchOp", ["x"], ["y"], domain="example.com")], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.com", 1)],
        ir_version=8)
    with pytest.raises(ortlite.NotImplemented, match="NoSuchOp"):
        backend.prepare(model)


def test_backend_devices():
    assert backend.supports_device("CPU")
    assert not backend.supports_device("CUDA")
    assert not backend.supports_device("NOPE")
    with pytest.raises(ortlite.InvalidArgument):
        backend.prepare(add_model(inputs=("a", "b"), output="c", ir_version=8, serialize=False),
                        device="CUDA")
    with pytest.raises(TypeError):
        backend.prepare(12)


def test_backend_checks_the_model():
    model = add_model(inputs=("a", "b"), output="c", ir_version=8, serialize=False)
    model.graph.node[0].input[1] = "missing"
    with pytest.raises(onnx.checker.ValidationError):
        backend.prepare(model)


def test_onnx_backend_test_runner_drives_ortlite():
    import onnx.backend.test

    bt = onnx.backend.test.BackendTest(backend, __name__)
    for name in ("test_abs", "test_add_bcast", "test_relu", "test_softmax_axis_0",
                 "test_gemm_default_no_bias", "test_reduce_sum_keepdims_example"):
        bt.include(rf"^{name}_cpu$")
    # The runner skips every test the include patterns do not match.
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(bt.tests)
    ids = [t.id() for t in suite]  # (the suite lets go of each test once it has run)
    with open(os.devnull, "w") as sink:
        result = unittest.TextTestRunner(stream=sink, verbosity=0).run(suite)
    assert result.wasSuccessful(), result.failures + result.errors
    # (testsRun counts skipped tests before Python 3.12, not since.)
    skipped = {t.id() for t, _ in result.skipped}
    ran = [i for i in ids if i not in skipped]
    assert len(ran) == 6, ran
