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
# The Python suite runs on TEST_WORKERS pytest-xdist workers (CI's machine has two cores),
# in collection order: each file whole on one worker, tests/backends whole on one (one Spark
# session), tests/unit test by test (tests/conftest.py); the 20 slowest tests of the whole
# run are printed at its end (pyproject's addopts).
# `make lint` (ruff check, ruff format --check, mypy strict; about 10 s) runs first.
# The TypeScript client's suite (clients/ts: npm ci from the lockfile, strict type check and
# build, node --test, its browser tests in a headless Chromium when one is installed) runs
# first; the Python suite's test_ts_client_* files then use the same build. Both need
# Node.js 20 or later; SHUFFLEDP_REQUIRE_BROWSER=1 (set by .ci/run) makes a missing
# Chromium a failure instead of a skip.
TEST_WORKERS ?= 2
TS := clients/ts
test: $(VENV)/.installed-dev $(TS)/node_modules/.installed lint
	cd $(TS) && npm test
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

$(TS)/node_modules/.installed: $(TS)/package-lock.json
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null \
		|| { echo "make test needs Node.js 20 or later (node --version: $$(node --version 2>/dev/null || echo not found))"; exit 2; }
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

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
	rm -rf $(VENV) demo-output site .pytest_cache .mypy_cache .ruff_cache $(TS)/node_modules $(TS)/build $(TS)/dist
