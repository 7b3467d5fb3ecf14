# Two entry points on a fresh machine: `make demo` and `make test`.
# Each creates .venv from a bare python3 if it is missing and installs what it needs.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Stamp files re-run the install when pyproject.toml changes.
$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[plot]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-demo

demo: $(VENV)/.installed-demo
	$(BIN)/shuffledp demo

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests benchmarks docs
	$(BIN)/ruff format --check src tests benchmarks docs
	$(BIN)/mypy

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/flip_throughput.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache .mypy_cache .ruff_cache
