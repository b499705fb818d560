# nnbridge — every target sets up .venv itself (Python 3.11 + make is all it needs).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1
export MPLBACKEND := Agg

.PHONY: demo test bench conformance protos lint clean setup

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m nnbridge.demo

test: $(STAMP)
	$(PY) -m ruff check nnbridge tests bench
	$(PY) -m pytest -n 2 -p no:cacheprovider tests

bench: $(STAMP)
	$(PY) -m bench

conformance: $(STAMP)
	$(PY) -m bench.conformance

protos: $(STAMP)
	$(PY) -m nnbridge.protos.generate

lint: $(STAMP)
	$(PY) -m ruff check nnbridge tests bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache out
