# Two commands do all set-up on a fresh machine:
#   make demo   creates .venv, installs rwb, evaluates every backend on the built-in dataset and
#               prints the tuned result
#   make test   installs what the tests need, starts the services they use, runs the suite
#   make test-unit  the fast tier: unit + contract tests needing no server, no model, nothing
#               slow (about 2 minutes on 2 cores)
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
STAMP := $(VENV)/.rwb-installed
# pytest selection; CI runs everything (slow tests included)
PYTEST_ARGS ?=

.PHONY: venv demo test test-unit test-fast lint notebooks bench clean services-start services-stop

# exact versions (pyproject.toml has ranges); rewrite with scripts/write_constraints.py
CONSTRAINTS := scripts/constraints.txt

$(STAMP): pyproject.toml $(CONSTRAINTS) scripts/install_torch.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, CPU build: a local CPU wheel pip finds offline, else PyTorch's CPU index
	# (a plain `pip install torch` would pull the multi-GB CUDA build)
	bash scripts/install_torch.sh $(BIN)/python
	$(PIP) install -q -c $(CONSTRAINTS) -e '.[dev]'
	touch $@

venv: $(STAMP)

demo: venv
	$(BIN)/rwb backends
	$(BIN)/rwb eval sweeps/quickstart.yaml --out runs/demo-eval --force
	$(BIN)/rwb sweep sweeps/quickstart.yaml --strategy target --target-recall 0.95 --out runs/demo-tuned

test: venv
	bash scripts/run_tests.sh $(PYTEST_ARGS)

# the fast tier: the tests that need no server (services), no model (model) and are not slow,
# over the whole of tests/ (the markers say the cost; docs/development.md); no lint (make lint)
FAST_TIER := not services and not model and not slow
test-unit: venv
	RWB_TEST_SERVICES=0 RWB_TEST_LINT=0 bash scripts/run_tests.sh -m "$(FAST_TIER)" tests \
	  $(PYTEST_ARGS)

test-fast: venv
	bash scripts/run_tests.sh -m "not slow" $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check retrieval tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

notebooks: venv
	bash scripts/run_tests.sh tests/project/test_notebooks.py

bench: venv
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf runs .services .test-cache .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
