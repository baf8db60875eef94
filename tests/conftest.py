import os
import sys

# Tests import the in-place build (make build) from the repository root.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# `make asan` / `make valgrind` test another build of the package (e.g. build/asan/lib,
# holding ortlite/*.py and a sanitized _ortlite .so): ORTLITE_TEST_PATH goes first.
if os.environ.get("ORTLITE_TEST_PATH"):
    sys.path.insert(0, os.path.abspath(os.environ["ORTLITE_TEST_PATH"]))
