"""pytest plugin loaded by tools/asan/run.sh (-p child_env): processes the tests start
(`python -c` subprocesses) run without the sanitizer runtime.

Those subprocesses put the repository root first on sys.path, so they import the
in-place (unsanitized) build, not build/asan: the ASan runtime would check nothing of
ortlite there, would only report the interpreter's and protobuf's exit-time leaks, and
cannot run under the RLIMIT_AS that tests/safety/test_bad_inputs.py gives its children (ASan
reserves terabytes of shadow address space). The pytest process itself keeps the
runtime it was started with."""

import os

if "ORTLITE_CHILD_ASAN_OPTIONS" in os.environ:
    for var in ("LD_PRELOAD", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
        os.environ.pop(var, None)


def pytest_collection_finish(session):
    """The tests must have imported the sanitized build, not the in-place one."""
    import sys

    mod = sys.modules.get("ortlite._ortlite")
    want = os.path.abspath(os.environ.get("ORTLITE_TEST_PATH", ""))
    if mod is not None and want and not os.path.abspath(mod.__file__).startswith(want):
        raise RuntimeError(f"make asan: tests imported {mod.__file__}, not the build in {want}")
    if mod is not None:
        print(f"\nortlite under test: {mod.__file__}")
