# nnbridge — every target sets up .venv itself (Python 3.11 + make is all it needs).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TEST_STAMP  := $(VENV)/.installed-torch
BENCH_STAMP := $(VENV)/.installed-bench
export PYTHONDONTWRITEBYTECODE := 1
export MPLBACKEND := Agg

.PHONY: demo test test-fast bench conformance fuzz fixtures protos curves lint clean setup

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# make test also runs the tests of the optional extras: the torch front end and Ray sweeps
$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[dev,torch,sweep]"
	touch $(TEST_STAMP)

# make bench also needs HF transformers (real architectures, random weights, nothing downloaded)
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[dev,bench,sweep]"
	touch $(BENCH_STAMP)

demo: $(STAMP)
	$(PY) -m nnbridge.apps.demo

test: $(TEST_STAMP) lint
	$(PY) -m pytest -n 2 --dist loadgroup -p no:cacheprovider --durations=20 tests

# the quick local loop: the suite without the cases marked slow (make test runs those too)
test-fast: $(TEST_STAMP) lint
	$(PY) -m pytest -n 2 --dist loadgroup -p no:cacheprovider -m "not slow" tests

bench: $(BENCH_STAMP)
	$(PY) -m bench

# the real-architecture test fixtures (tests/fixtures/architectures), exported with torch and HF transformers
fixtures: $(BENCH_STAMP)
	$(PY) -m tools.architecture_fixtures

conformance: $(STAMP)
	$(PY) -m bench.conformance

# mutated files of every format through the entry points; FUZZ_SECONDS per format (default 600)
FUZZ_SECONDS ?= 600
fuzz: $(STAMP)
	$(PY) -m tools.fuzz --seconds $(FUZZ_SECONDS)

protos: $(STAMP)
	$(PY) -m nnbridge.protos.generate

# the compiled curves' per-curve loops (nnbridge/kernels/compiled/curve_loops.py) from generate.py's table
curves: $(STAMP)
	$(PY) -m nnbridge.kernels.compiled.generate

# ruff, and radon's complexity gate (tools/complexity.py: at most 15 functions rated D or worse, none E/F)
lint: $(STAMP)
	$(PY) -m ruff check nnbridge tests bench tools
	$(PY) -m tools.complexity nnbridge

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache out
