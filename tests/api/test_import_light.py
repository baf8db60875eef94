"""`import ortlite` loads only what every user needs; the rest of the API loads on first use
(module __getattr__) and behaves as if it had been imported eagerly."""

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import ortlite

ROOT = Path(__file__).resolve().parents[2]

LAZY_MODULES = ("ortlite._adapter", "ortlite._device", "ortlite._ep_device", "ortlite._memory",
                "ortlite._enums", "ortlite._pickle", "ortlite._logging")


def _modules_after_import(code="import ortlite"):
    probe = (f"import sys, numpy\nbefore = set(sys.modules)\n{code}\n"
             "print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return set(out.stdout.split())


def test_import_loads_no_rarely_used_module():
    loaded = _modules_after_import()
    assert "ortlite._ortlite" in loaded
    for name in LAZY_MODULES + ("threading", "mmap", "multiprocessing", "hashlib"):
        assert name not in loaded, f"import ortlite loaded {name}"


@pytest.mark.parametrize("name,module", [
    ("OrtDevice", "ortlite._device"), ("LoraAdapter", "ortlite._adapter"),
    ("AdapterFormat", "ortlite._adapter"), ("OrtMemoryInfo", "ortlite._memory"),
    ("OrtArenaCfg", "ortlite._memory"), ("OrtMemType", "ortlite._memory"),
    ("create_and_register_allocator", "ortlite._memory"), ("OrtEpDevice", "ortlite._ep_device"),
    ("get_ep_devices", "ortlite._ep_device"), ("OrtHardwareDeviceType", "ortlite._ep_device"),
    ("GraphOptimizationLevel", "ortlite._enums"), ("ExecutionMode", "ortlite._enums"),
    ("OrtSparseFormat", "ortlite._enums"), ("set_default_logger_callback", "ortlite._logging"),
    ("set_default_logger_severity", "ortlite._logging"),
])
def test_lazy_name_resolves_to_its_module_object(name, module):
    value = getattr(ortlite, name)
    assert value is getattr(sys.modules[module], name)
    assert getattr(ortlite, name) is value  # cached in the module namespace
    assert name in dir(ortlite)
    assert name in ortlite.__all__


def test_first_use_in_a_fresh_process_loads_only_that_module():
    loaded = _modules_after_import("import ortlite\nortlite.OrtDevice")
    assert "ortlite._device" in loaded
    assert "ortlite._memory" not in loaded and "ortlite._adapter" not in loaded


def test_unknown_attribute_is_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        ortlite.NoSuchThing
    assert not hasattr(ortlite, "_no_such_private")


def test_star_import_includes_lazy_names():
    ns = {}
    exec("from ortlite import *", ns)
    for name in ("OrtDevice", "LoraAdapter", "OrtMemoryInfo", "get_ep_devices",
                 "InferenceSession", "SessionOptions", "RunOptions", "OrtValue"):
        assert name in ns, name
    assert ns["OrtMemoryInfo"] is ortlite.OrtMemoryInfo


def test_lazy_classes_pickle_by_reference_in_a_fresh_process():
    # Unpickling names ortlite.<Name>: the lazy lookup must answer it.
    dumped = pickle.dumps(ortlite.OrtMemType)
    code = ("import pickle, sys\nimport ortlite\n"
            f"t = pickle.loads({dumped!r})\n"
            "assert t is ortlite.OrtMemType, t\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_add_active_adapter_still_type_checks_without_eager_adapter_module():
    ro = ortlite.RunOptions()
    with pytest.raises(TypeError, match="expects a LoraAdapter, not int"):
        ro.add_active_adapter(3)


def _run_fresh(code):
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_session_options_getters_return_enum_members_before_the_enums_are_named():
    # The first getter loads ortlite._enums; its members are those ortlite names.
    out = _run_fresh(
        "import sys, ortlite\nso = ortlite.SessionOptions()\n"
        "print('ortlite._enums' in sys.modules)\n"
        "g, e = so.graph_optimization_level, so.execution_mode\n"
        "print(g is ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL, "
        "e is ortlite.ExecutionMode.ORT_SEQUENTIAL, type(g).__module__)")
    assert out == ["False", "True", "True", "ortlite"]


def test_pickling_before_the_pickle_module_loads_round_trips_and_loads_it():
    out = _run_fresh(
        "import pickle, sys, numpy as np, ortlite\n"
        "print('ortlite._pickle' in sys.modules)\n"
        "so = ortlite.SessionOptions(); so.intra_op_num_threads = 3\n"
        "ro = ortlite.RunOptions(); ro.logid = 'r7'\n"
        "v = ortlite.OrtValue.ortvalue_from_numpy(np.arange(4, dtype=np.int64))\n"
        "so2, ro2, v2 = pickle.loads(pickle.dumps((so, ro, v)))\n"
        "print('ortlite._pickle' in sys.modules, so2.intra_op_num_threads, ro2.logid, "
        "type(ro2) is ortlite.RunOptions, v2.numpy().tolist() == [0, 1, 2, 3])")
    assert out == ["False", "True", "3", "r7", "True", "True"]


def test_default_logger_callback_works_when_loaded_on_first_use():
    out = _run_fresh(
        "import ortlite, onnx\nfrom onnx import helper, TensorProto as T\n"
        "msgs = []\n"
        "ortlite.set_default_logger_callback(lambda *a: msgs.append(a), 1)\n"
        "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g',\n"
        "    [helper.make_tensor_value_info('x', T.FLOAT, [2])],\n"
        "    [helper.make_tensor_value_info('y', T.FLOAT, [2])])\n"
        "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])\n"
        "ortlite.InferenceSession(m.SerializeToString())\n"
        "print(len(msgs) >= 1, msgs[0][0], msgs[0][1])")
    assert out == ["True", "1", "ortlite"]
