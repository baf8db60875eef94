"""OpenBLAS (the scipy-openblas32 wheel) is not linked into the extension: it is dlopened on
the first product large enough for it (src/compute/blas.cc), so `import ortlite` does not
load it, the environment is left as it was, and ORTLITE_GEMM=own keeps it out entirely."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("scipy_openblas32")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    from onnx import TensorProto, helper
    import ortlite
    LIB = "scipy_openblas32/lib/libscipy_openblas.so"
    mapped = lambda: LIB in open("/proc/self/maps").read()
    print("import", mapped())
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [256, 512]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [512, 384])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    s = ortlite.InferenceSession(m.SerializeToString())
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 512)).astype(np.float32)
    b = rng.standard_normal((512, 384)).astype(np.float32)
    y = s.run(None, {"a": a, "b": b})[0]
    np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    print("run", mapped())
    print("env", os.environ.get("OPENBLAS_NUM_THREADS"))
""")


def run(env_extra):
    env = dict(os.environ, PYTHONPATH=ROOT, **env_extra)
    env.pop("OPENBLAS_NUM_THREADS", None)
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return dict(line.split(" ", 1) for line in r.stdout.split("\n") if line)


def test_blas_loads_on_first_large_product_only():
    out = run({})
    assert out == {"import": "False", "run": "True", "env": "None"}


def test_callers_openblas_setting_is_kept():
    assert run({"OPENBLAS_NUM_THREADS": "3"})["env"] == "3"


def test_gemm_own_never_loads_it():
    out = run({"ORTLITE_GEMM": "own"})
    assert out["import"] == "False" and out["run"] == "False"
