#!/usr/bin/env bash
# Runs a command under valgrind memcheck with PYTHONMALLOC=malloc and the CPython/numpy/
# libc suppressions in tools/valgrind/python.supp, then checks the XML report with
# tools/valgrind/check_xml.py: fails on any memcheck error and on any definitely or
# indirectly lost block with an ortlite frame; prints the counts.
#
# Usage: tools/valgrind/run.sh NAME COMMAND [ARGS...]   (report in build/valgrind/NAME.xml)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
name=$1
shift
if ! command -v valgrind >/dev/null; then
  if [ "${VALGRIND_OPTIONAL:-0}" = 1 ]; then echo "valgrind $name: SKIPPED (valgrind not installed)"; exit 0; fi
  echo "valgrind $name: valgrind not installed (apt-get install valgrind)"; exit 1
fi
mkdir -p build/valgrind
xml=build/valgrind/$name.xml
rm -f "$xml" "build/valgrind/$name.log"
set +e
PYTHONMALLOC=malloc valgrind --tool=memcheck --suppressions="$ROOT/tools/valgrind/python.supp" \
    --suppressions="$ROOT/tools/valgrind/onnxruntime.supp" \
    --suppressions="$ROOT/tools/valgrind/cuda.supp" \
    --leak-check=full --show-leak-kinds=definite,indirect --num-callers=40 \
    --xml=yes --xml-file="$xml" --log-file="build/valgrind/$name.log" "$@"
rc=$?
set -e
"$PY" tools/valgrind/check_xml.py "$xml" || rc=${rc/#0/1}
if [ "$rc" -ne 0 ]; then echo "valgrind $name: FAILED (rc=$rc, see build/valgrind/$name.*)"; exit 1; fi
echo "valgrind $name: OK"
