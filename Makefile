# Two entry points on a fresh machine: `make demo` and `make test`.
# Each creates .venv from a bare python3 if it is missing and installs what it needs.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test docs lint bench clean

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

# The suite includes tests/examples (every script in examples/) and tests/docs,
# which builds the site with --strict: a broken page or reference fails `make test`.
# It runs on TEST_WORKERS pytest-xdist workers (CI's machine has two cores), each test file
# whole on one worker (tests/backends whole on one: one Spark session), in collection order;
# the 20 slowest tests of the whole run are printed at its end (pyproject's addopts).
TEST_WORKERS ?= 2
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The documentation site (MkDocs + Material + mkdocstrings) into site/; warnings are errors.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests benchmarks docs examples
	$(BIN)/ruff format --check src tests benchmarks docs examples
	$(BIN)/mypy

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/flip_throughput.py

clean:
	rm -rf $(VENV) demo-output site .pytest_cache .mypy_cache .ruff_cache
