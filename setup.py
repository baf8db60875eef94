"""Builds ortlite._ortlite from the C++17 sources under src/ with setuptools alone.

Environment switches:
  ORTLITE_JOBS      parallel compile jobs (default: number of CPUs)
  ORTLITE_DEBUG=1   -O0 -g
  ORTLITE_SANITIZE  e.g. "address,undefined": builds with -fsanitize=... -fno-omit-frame-pointer
  ORTLITE_CUDA      1: build the CUDA library (fail without nvcc / cuDNN); 0: CPU only;
                    unset: build it when nvcc and cuDNN are found
  CUDA_HOME         the CUDA toolkit (default: nvcc's, or /usr/local/cuda); CUDNN_HOME cuDNN
  ORTLITE_CUDA_ARCHS  SM versions to compile for (default "80;90"; PTX of the last one too)
  ORTLITE_STRIP     1: strip the symbol tables of the linked libraries; 0: keep them.
                    Default: strip release builds that are installed (pip install ., a wheel,
                    build_ext without --inplace); keep them in debug, sanitizer and in-place
                    builds, whose stacks valgrind, gdb and the suppression files read.

The CUDA library (ortlite/_ortlite_cuda.so: src/providers/cuda/*.cu by nvcc, linking cudart, cuBLAS
and cuDNN) is a plain shared object next to the extension, dlopened by the extension only
when the CUDA provider is asked for; the extension itself never links CUDA.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def _sources():
    # src/providers/cuda/*.cc are the provider's C++ side (no CUDA headers); the .cu files go to nvcc.
    return sorted(glob.glob(os.path.join("src", "**", "*.cc"), recursive=True))


CUDA_LIBRARY = "_ortlite_cuda.so"


def _cuda_config():
    """nvcc, include and library dirs for the CUDA library, or None for a CPU-only build."""
    switch = os.environ.get("ORTLITE_CUDA", "")
    if switch == "0":
        return None

    def missing(what):
        if switch == "1":
            sys.exit(f"ORTLITE_CUDA=1 but {what}")
        print(f"ortlite: building without CUDA ({what})", file=sys.stderr)
        return None

    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
    if not nvcc and os.path.exists("/usr/local/cuda/bin/nvcc"):
        nvcc = "/usr/local/cuda/bin/nvcc"
    if not nvcc or not os.path.exists(nvcc):
        return missing("nvcc was not found (set CUDA_HOME)")
    home = home or os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    cudnn = os.environ.get("CUDNN_HOME")
    inc_candidates = ([os.path.join(cudnn, "include")] if cudnn else []) + [
        os.path.join(home, "include"), "/usr/local/include", "/usr/include",
        "/usr/include/x86_64-linux-gnu"]
    lib_candidates = ([os.path.join(cudnn, "lib64"), os.path.join(cudnn, "lib")] if cudnn else []) + [
        os.path.join(home, "lib64"), os.path.join(home, "lib"), "/usr/local/lib",
        "/usr/lib/x86_64-linux-gnu"]
    cudnn_inc = next((d for d in inc_candidates if os.path.exists(os.path.join(d, "cudnn.h"))), None)
    if not cudnn_inc:
        return missing("cudnn.h was not found (set CUDNN_HOME)")
    libdirs = [d for d in lib_candidates if glob.glob(os.path.join(d, "libcublas.so*"))
               or glob.glob(os.path.join(d, "libcudnn.so*"))]
    archs = [a.strip() for a in os.environ.get("ORTLITE_CUDA_ARCHS", "80;90").split(";") if a.strip()]
    gencode = []
    for i, a in enumerate(archs):
        code = f"[sm_{a},compute_{a}]" if i == len(archs) - 1 else f"sm_{a}"
        gencode += ["-gencode", f"arch=compute_{a},code={code}"]
    cc = os.environ.get("CC", "")
    launcher = ["ccache"] if cc.split()[:1] == ["ccache"] and shutil.which("ccache") else []
    flags = ["-std=c++17", "-O3", "-Xcompiler", "-fPIC,-fvisibility=hidden,-Wall,-Wextra",
             "-Werror", "all-warnings", "-Isrc", "-Iinclude", f"-I{cudnn_inc}"] + gencode
    return {"nvcc": launcher + [nvcc], "flags": flags, "libdirs": libdirs}


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
    if not san:
        # Nothing in ortlite uses typeid or dynamic_cast; with RTTI on, every lambda held in
        # a std::function (each kernel factory, each parallel loop body) carries a typeinfo
        # and its mangled name: about 18000 of them, 4 MB of a 14 MB library. Thrown types
        # keep their typeinfo without it. Sanitizer builds keep RTTI for UBSan's vptr check.
        cflags += ["-fno-rtti"]
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

    def copy_extensions_to_source(self):
        # --inplace: setuptools copies the extension from build_lib into the source tree; the
        # CUDA library is no extension, so it follows here (or goes, after a CPU-only build).
        super().copy_extensions_to_source()
        built = os.path.join(self.build_lib, "ortlite", CUDA_LIBRARY)
        dst = os.path.join(self.get_finalized_command("build_py").get_package_dir("ortlite"),
                           CUDA_LIBRARY)
        if not os.path.exists(built):
            if os.path.exists(dst):
                os.remove(dst)
        elif not os.path.exists(dst) or os.path.getmtime(dst) < os.path.getmtime(built):
            shutil.copy2(built, dst + ".tmp")
            os.replace(dst + ".tmp", dst)

    def run(self):
        # setuptools clears self.inplace while it builds (it builds into build_lib, then
        # copies): remember what was asked.
        self._in_place = bool(self.inplace)
        super().run()

    def _strip(self):
        switch = os.environ.get("ORTLITE_STRIP", "")
        if switch in ("0", "1"):
            return switch == "1"
        debug = os.environ.get("ORTLITE_DEBUG") == "1" or os.environ.get("ORTLITE_SANITIZE")
        return not debug and not getattr(self, "_in_place", False)

    def build_extension(self, ext):
        compiler = self.compiler
        strip = self._strip()
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
        # Objects compiled with other flags (an edit of _flags, ORTLITE_DEBUG, another BLAS)
        # are stale however new they are: ortlite's flags and macros of a complete compile
        # are recorded next to them, and removed while one is under way. (The compiler and
        # its base flags are left out: with or without ccache the objects are the same.)
        os.makedirs(build_temp, exist_ok=True)
        flags_file = os.path.join(build_temp, "compile-flags.txt")
        flags_now = "\n".join(ext.extra_compile_args + [f"-D{k}={v}" for k, v in macros]) + "\n"
        try:
            with open(flags_file) as f:
                same_flags = f.read() == flags_now
        except OSError:
            same_flags = False
        if not same_flags and os.path.exists(flags_file):
            os.remove(flags_file)

        def one(src):
            obj = os.path.join(build_temp, os.path.splitext(src)[0] + ".o")
            dep = obj + ".d"
            if same_flags and _newer_than_deps(obj, src, dep):
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

        cuda = _cuda_config()
        cuda_sources = sorted(glob.glob(os.path.join("src", "providers", "cuda", "*.cu"))) if cuda else []

        def one_cu(src):
            obj = os.path.join(build_temp, src + ".o")
            dep = obj + ".d"
            if _newer_than_deps(obj, src, dep):
                return obj
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            _run(cuda["nvcc"] + cuda["flags"] + ["-MD", "-MF", dep, "-c", src, "-o", obj])
            return obj

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            # nvcc takes longest (one pass per GPU architecture): start it first.
            cu_futures = [pool.submit(one_cu, src) for src in cuda_sources]
            objects = list(pool.map(one, ext.sources))
            cu_objects = [f.result() for f in cu_futures]
        if not same_flags:
            with open(flags_file, "w") as f:
                f.write(flags_now)
        ext_path = self.get_ext_fullpath(ext.name)
        cuda_path = os.path.join(os.path.dirname(ext_path), CUDA_LIBRARY)
        if cuda:
            _link_cuda(cuda, cu_objects, cuda_path, strip,
                       os.path.join(build_temp, CUDA_LIBRARY + ".stripped"))
        elif os.path.exists(cuda_path):
            os.remove(cuda_path)  # a CPU-only build must not pick up an earlier CUDA library
        # A library linked the other way (stripped or not) is linked again.
        # (Stamps live in build_temp: nothing in build_lib may be one, it is packaged.)
        stamp = os.path.join(build_temp, os.path.basename(ext_path) + ".stripped")
        if os.path.exists(ext_path) and os.path.exists(stamp) != strip:
            os.remove(ext_path)
        compiler.link_shared_object(
            objects,
            ext_path,
            libraries=self.get_libraries(ext),
            library_dirs=ext.library_dirs,
            runtime_library_dirs=ext.runtime_library_dirs,
            extra_postargs=ext.extra_link_args + (["-s"] if strip else []),
            export_symbols=self.get_export_symbols(ext),
            build_temp=build_temp,
            target_lang="c++",
        )
        if strip:
            open(stamp, "w").close()
        elif os.path.exists(stamp):
            os.remove(stamp)


def _run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit(" ".join(cmd) + "\n" + proc.stdout)


def _link_cuda(cuda, objects, out, strip, stamp):
    """Links the CUDA library (static cudart; cuBLAS and cuDNN found through an rpath)."""
    up_to_date = os.path.exists(out) and all(
        os.path.getmtime(o) <= os.path.getmtime(out) for o in objects)
    if up_to_date and os.path.exists(stamp) == strip:
        return
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    rpath = [f"-Xlinker=-rpath,{d}" for d in cuda["libdirs"]]
    _run(cuda["nvcc"] + ["-shared", "-o", out + ".tmp"] + objects
         + [f"-L{d}" for d in cuda["libdirs"]] + ["-lcublas", "-lcudnn"] + rpath
         + ["-Xlinker=--exclude-libs,ALL"] + (["-Xlinker=-s"] if strip else []))
    os.replace(out + ".tmp", out)
    if strip:
        open(stamp, "w").close()
    elif os.path.exists(stamp):
        os.remove(stamp)


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


def _blas_config():
    """OpenBLAS from the scipy-openblas32 wheel (a build and runtime dependency), or None
    when ORTLITE_BLAS=0 or the wheel is missing: ortlite then multiplies matrices with its
    own kernels only. The extension dlopens the library on its first large product: from the
    wheel's folder next to ortlite/ in the same site-packages, or the copy it was built
    against (an in-place build). Importing scipy_openblas32 in Python is not needed (it
    would add its own import time to `import ortlite`)."""
    if os.environ.get("ORTLITE_BLAS", "") == "0":
        return None
    try:
        import scipy_openblas32
    except ImportError:
        if os.environ.get("ORTLITE_BLAS", "") == "1":
            sys.exit("ORTLITE_BLAS=1 but the scipy-openblas32 wheel is not installed")
        print("ortlite: building without a BLAS (pip install scipy-openblas32)", file=sys.stderr)
        return None
    lib_dir = scipy_openblas32.get_lib_dir()
    lib = "lib" + scipy_openblas32.get_library() + ".so"
    # Not linked: dlopened on the first product large enough for it (compute/blas.cc), so
    # `import ortlite` does not pay for loading it.
    return {
        "include_dirs": [scipy_openblas32.get_include_dir()],
        "define_macros": [("ORTLITE_HAVE_BLAS", "1"), ("ORTLITE_BLAS_LIB", f'"{lib}"'),
                          ("ORTLITE_BLAS_DIR", f'"{lib_dir}"')],
    }


cflags, ldflags = _flags()
blas = _blas_config() or {}

ext = Extension(
    "ortlite._ortlite",
    sources=_sources(),
    include_dirs=["include", "src", numpy.get_include()] + blas.get("include_dirs", []),
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("NPY_TARGET_VERSION", "NPY_1_22_API_VERSION")]
    + blas.get("define_macros", []),
    extra_compile_args=cflags,
    extra_link_args=ldflags,
    libraries=["dl"] + blas.get("libraries", []),  # dl: dlopen of the CUDA library
    library_dirs=blas.get("library_dirs", []),
    runtime_library_dirs=blas.get("runtime_library_dirs", []),
    language="c++",
)

setup(ext_modules=[ext], cmdclass={"build_ext": ParallelBuildExt})
