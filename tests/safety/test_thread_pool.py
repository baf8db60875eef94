"""ThreadPool::parallel_for (src/core/thread_pool.cc) in a C++ stress program of its own:
coverage, exceptions, nesting and concurrent callers at 2-4 threads, with and without
spinning (tests/safety/thread_pool_stress.cc)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_parallel_for_stress(tmp_path):
    cxx = os.environ.get("CXX", "c++").split()
    if not shutil.which(cxx[-1] if cxx[0] == "ccache" else cxx[0]):
        pytest.skip("no C++ compiler")
    exe = tmp_path / "pool_stress"
    subprocess.run(cxx + ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror",
                          f"-I{ROOT / 'include'}", str(ROOT / "tests/safety/thread_pool_stress.cc"),
                          str(ROOT / "src/core/thread_pool.cc"), "-o", str(exe), "-lpthread"],
                   check=True, capture_output=True, text=True, timeout=300)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
