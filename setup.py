"""Builds ortlite._ortlite from the C++17 sources under src/ with setuptools alone.

Environment switches:
  ORTLITE_JOBS      parallel compile jobs (default: number of CPUs)
  ORTLITE_DEBUG=1   -O0 -g
  ORTLITE_SANITIZE  e.g. "address,undefined": builds with -fsanitize=... -fno-omit-frame-pointer
"""

import glob
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def _sources():
    files = sorted(glob.glob(os.path.join("src", "**", "*.cc"), recursive=True))
    return [f for f in files if not f.startswith(os.path.join("src", "cuda"))]


def _flags():
    cflags = ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden", "-pthread"]
    ldflags = ["-pthread"]
    if os.environ.get("ORTLITE_DEBUG") == "1":
        cflags += ["-O0", "-g"]
    else:
        cflags += ["-O3", "-g0"]
    native = os.environ.get("ORTLITE_NATIVE", "0") == "1"
    if native:
        cflags += ["-march=native"]
    san = os.environ.get("ORTLITE_SANITIZE", "")
    if san:
        cflags += [f"-fsanitize={san}", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
        ldflags += [f"-fsanitize={san}"]
    return cflags, ldflags


def _newer_than_deps(obj, src, depfile):
    """True when obj is newer than src and every header it included last time."""
    if not (os.path.exists(obj) and os.path.exists(depfile)):
        return False
    t = os.path.getmtime(obj)
    with open(depfile) as f:
        text = f.read().replace("\\\n", " ")
    deps = text.split(":", 1)[1].split() if ":" in text else []
    for d in [src] + deps:
        if not os.path.exists(d) or os.path.getmtime(d) > t:
            return False
    return True


class ParallelBuildExt(build_ext):
    """Compiles each source on its own (in parallel, skipping up-to-date objects)."""

    def build_extension(self, ext):
        compiler = self.compiler
        # distutils passes C flags through CFLAGS/OPT; keep only ours for C++.
        for attr in ("compiler_so", "compiler_cxx"):
            cmd = getattr(compiler, attr, None)
            if cmd:
                cmd = [c for c in cmd if c not in ("-Wstrict-prototypes",)]
                cmd = [c for c in cmd if not re.match(r"-O\d|-g$|-DNDEBUG", c)]
                setattr(compiler, attr, cmd)
        compiler.compiler_so = _with_cxx(compiler.compiler_so)
        compiler.linker_so = _with_cxx(compiler.linker_so)
        build_temp = self.build_temp
        macros = ext.define_macros or []
        jobs = int(os.environ.get("ORTLITE_JOBS", os.cpu_count() or 1))

        def one(src):
            obj = os.path.join(build_temp, os.path.splitext(src)[0] + ".o")
            dep = obj + ".d"
            if _newer_than_deps(obj, src, dep):
                return obj
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            return compiler.compile(
                [src],
                output_dir=build_temp,
                macros=macros,
                include_dirs=ext.include_dirs,
                extra_postargs=ext.extra_compile_args + ["-MMD", "-MF", dep],
                depends=ext.depends,
            )[0]

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            objects = list(pool.map(one, ext.sources))
        ext_path = self.get_ext_fullpath(ext.name)
        compiler.link_shared_object(
            objects,
            ext_path,
            libraries=self.get_libraries(ext),
            library_dirs=ext.library_dirs,
            runtime_library_dirs=ext.runtime_library_dirs,
            extra_postargs=ext.extra_link_args,
            export_symbols=self.get_export_symbols(ext),
            build_temp=build_temp,
            target_lang="c++",
        )


def _with_cxx(cmd):
    """Swap the C compiler for the C++ one (g++), keeping a ccache prefix if present."""
    cxx = os.environ.get("CXX", "g++")
    out = list(cmd)
    for i, c in enumerate(out):
        base = os.path.basename(c)
        if base in ("ccache",):
            continue
        if re.match(r"^(.*-)?(gcc|cc|clang)(-\d+)?$", base):
            out[i] = cxx
        break
    return out


cflags, ldflags = _flags()

ext = Extension(
    "ortlite._ortlite",
    sources=_sources(),
    include_dirs=["include", "src", numpy.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("NPY_TARGET_VERSION", "NPY_1_22_API_VERSION")],
    extra_compile_args=cflags,
    extra_link_args=ldflags,
    language="c++",
)

setup(ext_modules=[ext], cmdclass={"build_ext": ParallelBuildExt})
