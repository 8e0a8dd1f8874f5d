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

# make test (the whole suite, several workers, the lint): the embedding stack is installed first
# and the corpora the slow tests embed start embedding in the background (scripts/prewarm_start.sh)
# on the core pip leaves idle while the rest installs; scripts/run_tests.sh picks it up
PREWARM := $(if $(filter test,$(MAKECMDGOALS)),$(if $(PYTEST_ARGS),,1),)

# make test installs without compiling every installed module to bytecode, pip's default (measured
# here, 2026-12-08: torch 27 -> 15 s, the rest of the venv 98 -> 36 s, 95 -> 33 CPU-s): the test
# processes compile what they import, once, and write it (PYTHONDONTWRITEBYTECODE emptied; also in
# scripts/run_tests.sh). Other goals keep pip's default, so a venv used where bytecode is not
# written (PYTHONDONTWRITEBYTECODE set) is not compiled again on every start.
ifneq ($(filter test test-unit test-fast,$(MAKECMDGOALS)),)
export PIP_COMPILE := 0
export PYTHONDONTWRITEBYTECODE :=
endif

$(STAMP): pyproject.toml $(CONSTRAINTS) scripts/install_torch.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# hnswlib is an sdist that compiles (~30 CPU-s): its wheel is built in the background while
	# torch installs, on the core pip leaves idle, and installed from there below (pip builds it
	# itself, as before, if that failed)
	rm -rf $(VENV)/wheels && mkdir -p $(VENV)/wheels && : >$(VENV)/wheels/build.pid
	$(BIN)/python -c 'import hnswlib' 2>/dev/null || { \
	  $(PIP) wheel -q --no-deps -c $(CONSTRAINTS) hnswlib -w $(VENV)/wheels \
	    >$(VENV)/wheels/build.log 2>&1 </dev/null & echo $$! >$(VENV)/wheels/build.pid; }
	# torch first, CPU build: a local CPU wheel pip finds offline, else PyTorch's CPU index
	# (a plain `pip install torch` would pull the multi-GB CUDA build)
	bash scripts/install_torch.sh $(BIN)/python
	if [ -n "$(PREWARM)" ] && [ "$$(nproc)" -gt 1 ] && [ "$${RWB_TEST_PREWARM:-1}" != 0 ] \
	    && [ "$${RWB_TEST_LINT:-1}" != 0 ] && [ "$${RWB_TEST_WORKERS:-2}" -gt 1 ]; then \
	  $(BIN)/python scripts/prewarm_tests.py requirements > $(VENV)/embed-requirements.txt \
	  && $(PIP) install -q -c $(CONSTRAINTS) -r $(VENV)/embed-requirements.txt \
	  && bash scripts/prewarm_start.sh $(BIN)/python \
	       "$${RWB_TEST_EMBEDDINGS_DIR:-$$PWD/.test-cache/embeddings}"; \
	fi
	pid=$$(cat $(VENV)/wheels/build.pid); \
	  while [ -n "$$pid" ] && kill -0 "$$pid" 2>/dev/null; do sleep 1; done
	# a failed install stops the embedding warm-up it started (scripts/run_tests.sh does otherwise)
	$(PIP) install -q -c $(CONSTRAINTS) -e '.[dev]' --find-links $(VENV)/wheels || { \
	  pid=$$(cat .test-cache/prewarm-embed.pid 2>/dev/null); \
	  if [ -n "$$pid" ] && grep -qs prewarm_tests /proc/$$pid/cmdline; then kill $$pid; fi; \
	  exit 1; }
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
