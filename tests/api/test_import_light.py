"""`import ortlite` loads only what every user needs; the rest of the API loads on first use
(module __getattr__) and behaves as if it had been imported eagerly."""

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import ortlite

ROOT = Path(__file__).resolve().parents[2]

LAZY_MODULES = ("ortlite._adapter", "ortlite._device", "ortlite._ep_device", "ortlite._memory")


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
