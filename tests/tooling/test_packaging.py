"""What a new user meets first: pinned dependencies, the Python versions the package
claims, the message of an unbuilt source tree, and stripped installed libraries."""

import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
from importlib import metadata

import pytest

from helpers import ROOT



def read_pins(path):
    pins = {}
    with open(os.path.join(ROOT, path)) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("-"):
                continue
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
            assert m, f"{path}: not an exact pin: {line!r}"
            pins[canonical(m.group(1))] = m.group(2)
    return pins


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_every_requirement_is_pinned_in_the_lock():
    lock = read_pins("requirements-lock.txt")
    for req in ("requirements.txt", "requirements-dev.txt"):
        for name, version in read_pins(req).items():
            assert lock.get(name) == version, (req, name, version, lock.get(name))
    # The build requirements (pip install . builds with them) are the lock's too.
    for spec in pyproject()["build-system"]["requires"]:
        name, version = spec.split("==")
        assert lock.get(canonical(name)) == version, spec


def test_wheel_build_venvs_hold_the_build_requirements_at_the_lock_pins():
    """make wheels (tools/build_wheels.sh) builds each Python's wheel in a venv of these
    packages at the lock's versions: each must be in the lock, and pyproject.toml's build
    requirements must all be among them."""
    with open(os.path.join(ROOT, "tools", "build_wheels.sh")) as f:
        m = re.search(r'^BUILD_REQS="([^"]+)"', f.read(), re.M)
    assert m, "tools/build_wheels.sh: no BUILD_REQS line"
    names = {canonical(n) for n in m.group(1).split()}
    lock = read_pins("requirements-lock.txt")
    assert names <= set(lock), names - set(lock)
    for spec in pyproject()["build-system"]["requires"]:
        assert canonical(spec.split("==")[0]) in names, spec


@pytest.mark.skipif(os.path.realpath(sys.prefix) != os.path.join(ROOT, ".venv"),
                    reason="checks the Makefile's venv")
def test_the_venv_holds_exactly_the_lock():
    lock = read_pins("requirements-lock.txt")
    # The venv's site-packages only: an imported package may put its vendored copies on
    # sys.path (ray adds ray/thirdparty_files, with colorama in it).
    where = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    installed = {canonical(d.metadata["Name"]): d.version
                 for d in metadata.distributions(path=where)}
    installed.pop("ortlite", None)  # make install puts ortlite itself there
    assert installed == lock


def test_requires_python_covers_the_build_requirements():
    # Each build requirement's own Requires-Python must admit the oldest Python the
    # package claims, or `pip install .` fails there.
    claimed = pyproject()["project"]["requires-python"]
    m = re.fullmatch(r">=\s*3\.(\d+)", claimed)
    assert m, claimed
    oldest = int(m.group(1))
    for spec in pyproject()["build-system"]["requires"]:
        name = spec.split("==")[0]
        need = metadata.metadata(name).get("Requires-Python") or ""
        for lo in re.findall(r">=\s*3\.(\d+)", need):
            assert int(lo) <= oldest, (spec, need, claimed)


def test_ml_dtypes_extra_matches_the_tested_versions():
    (spec,) = pyproject()["project"]["optional-dependencies"]["ml-dtypes"]
    m = re.fullmatch(r"ml_dtypes>=([\d.]+),<([\d.]+)", spec)
    assert m, spec
    with open(os.path.join(ROOT, "Makefile")) as f:
        (tested_min,) = re.findall(r"^ML_DTYPES_MIN := (\S+)$", f.read(), re.M)
    assert m.group(1) == tested_min
    newest = tuple(int(x) for x in read_pins("requirements-lock.txt")["ml-dtypes"].split("."))
    assert newest < tuple(int(x) for x in m.group(2).split("."))


def import_from(tree):
    return subprocess.run([sys.executable, "-c", "import ortlite"], cwd=tree,
                          capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})


def package_copy(dest):
    pkg = os.path.join(dest, "ortlite")
    os.makedirs(pkg)
    for f in os.listdir(os.path.join(ROOT, "ortlite")):
        if f.endswith(".py"):
            shutil.copy(os.path.join(ROOT, "ortlite", f), pkg)


def test_unbuilt_source_tree_says_what_to_do(tmp_path):
    package_copy(tmp_path)
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "src").mkdir()
    out = import_from(tmp_path)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last == ("ImportError: ortlite's C extension is not built in this source tree "
                    f"({tmp_path}): run `make build` there, or import ortlite from outside it")
    assert "circular import" not in out.stderr


def test_package_without_its_extension_says_reinstall(tmp_path):
    package_copy(tmp_path)
    out = import_from(tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "ImportError: ortlite's C extension (ortlite/_ortlite) is missing from "
        f"{tmp_path / 'ortlite'}: reinstall ortlite")


def elf_section_names(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2, path  # 64-bit ELF
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    out = []
    for i in range(shnum):
        name = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
        end = data.index(b"\0", names_off + name)
        out.append(data[names_off + name:end].decode())
    return out


EXT = "_ortlite" + sysconfig.get_config_var("EXT_SUFFIX")


@pytest.mark.skipif(bool(os.environ.get("ORTLITE_TEST_PATH")),
                    reason="a sanitizer build keeps its symbols")
def test_installed_build_is_stripped_and_in_place_build_is_not(tmp_path):
    # The in-place build (make build: what valgrind, gdb and the suppressions read) keeps
    # its symbol table; a build for installing (no --inplace, as pip install . and wheels
    # do) links the same objects again, stripped.
    assert ".symtab" in elf_section_names(os.path.join(ROOT, "ortlite", EXT))
    env = dict(os.environ, ORTLITE_CUDA="0")
    env.pop("ORTLITE_STRIP", None)
    out = subprocess.run(["flock", "build/.build.lock", sys.executable, "setup.py", "-q",
                          "build_ext", "-b", str(tmp_path)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout + out.stderr
    built = tmp_path / "ortlite" / EXT
    sections = elf_section_names(built)
    assert ".symtab" not in sections and ".dynsym" in sections
    in_place = os.path.getsize(os.path.join(ROOT, "ortlite", EXT))
    # The symbol table is a sixth of the in-place library (release builds have no RTTI
    # symbols: setup.py's -fno-rtti).
    assert os.path.getsize(built) < 0.9 * in_place
