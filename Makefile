# ortlite front door. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CCACHE := $(shell command -v ccache 2>/dev/null)
BUILD_ENV := $(if $(CCACHE),CC="ccache gcc" CXX="ccache g++",)
PYTEST_ARGS ?=

.PHONY: all venv build install demo test clean format bench

all: build

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip==25.3
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

venv: $(STAMP)

# In-place build of ortlite/_ortlite*.so (incremental: only changed sources recompile).
build: $(STAMP)
	@mkdir -p build
	$(BUILD_ENV) flock build/.build.lock $(PY) setup.py -q build_ext --inplace

# Installs the package into the venv the way a user would (pip install .).
install: $(STAMP)
	$(PY) -m pip install -q .

demo: build
	$(PY) tools/make_demo_model.py --out build/demo/cnn_classifier.onnx
	PYTHONPATH=$(CURDIR) $(PY) tools/demo.py build/demo/cnn_classifier.onnx

test: build
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) tests

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build ortlite/*.so *.egg-info
