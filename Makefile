# distsampling: every target installs what it needs into .venv first.
# `make help` lists the targets; a `## text` after a target is its help line.

.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
# torch is installed first, and only where the venv has none. The default is the CPU build
# that pip finds offline on this project's machines; elsewhere pick your own build, e.g.
#   make install TORCH='torch==2.5.1'      or      make install TORCH='torch --index-url <url>'
TORCH ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
HYPOTHESIS_PROFILE ?= ci
# pytest workers: twice the cores. Much of the suite's time is waiting, not computing (ranks and
# torchrun agents starting, rendezvous, S3 servers, a timeout shown on purpose): the extra
# workers fill it. TEST_WORKERS=auto runs one a core.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(2 * (os.cpu_count() or 1))')
export NO_MKDOCS_2_WARNING := 1
export HYPOTHESIS_PROFILE
# the tests keep compiled modules in __pycache__ (pytest its rewritten tests too) even where the
# environment turns that off (PYTHONDONTWRITEBYTECODE): else every pytest worker, and every rank
# or command a test starts, would compile the same files again on each run
test test-fast test-deep loops: export PYTHONDONTWRITEBYTECODE :=

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c 'import torch' 2>/dev/null || $(PY) -m pip install -q $(TORCH)
	@# pin the torch now installed, so that no extra can replace it with another build
	@$(PY) -c 'import torch; print("torch==" + torch.__version__)' > $(VENV)/constraints.txt
	$(PY) -m pip install -q -c $(VENV)/constraints.txt -e '.[dev]'
	@touch $@

.PHONY: install
install: $(VENV)/.installed chromium ## Create .venv and install distsampling (editable) with test, docs and lint tools

.PHONY: demo
demo: $(VENV)/.installed ## The main job: print which rank reads which sample for the users' own examples, then check it live
	$(PY) -m distsampling demo

.PHONY: test
test: $(VENV)/.installed chromium ## Run the whole suite in parallel (2 workers a core; Hypothesis profile ci; HYPOTHESIS_PROFILE=thorough searches 20x deeper)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

.PHONY: test-fast
test-fast: $(VENV)/.installed ## Run the suite without the multi-process (torch.distributed) tests
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m 'not multiprocess'

# A deep search where a change is: the thorough profile (1000 examples a property, 20x ci, a
# random seed) on the properties (-m hypothesis) of the test files tests/deep_tests.py picks: those
# named after each module changed since REF (or its folder; else those importing its names), and
# the test files changed. REF: origin/main, else HEAD~1 (the last commit and what is not committed);
# CHANGED narrows the change to some paths, e.g. CHANGED=src/distsampling/streaming/sharded.py
REF ?= $(shell git rev-parse -q --verify origin/main >/dev/null && echo origin/main || echo HEAD~1)
CHANGED ?=

.PHONY: test-deep
test-deep: $(VENV)/.installed ## Search 20x deeper (profile thorough) in the properties of the modules changed since REF (origin/main, else HEAD~1; CHANGED=paths narrows)
	@tests="$$($(PY) tests/deep_tests.py $(REF) $(CHANGED))" || exit 1; \
	if [ -z "$$tests" ]; then echo "test-deep: no module or test changed since $(REF)"; exit 0; fi; \
	echo "test-deep: HYPOTHESIS_PROFILE=thorough on" $$tests; \
	HYPOTHESIS_PROFILE=thorough $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m hypothesis -q $$tests

# the loop matrix's results (docs/loops.md is rendered from them); make test writes them too
LOOP_TESTS := tests/test_loops.py tests/test_loops_frameworks.py tests/test_detection_loaders.py
docs/generated/loops.json:
	$(MAKE) loops

.PHONY: loops
loops: $(VENV)/.installed ## Run every sampler inside every loop users run (the matrix on docs/loops.md)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -q $(LOOP_TESTS)

.PHONY: docs
docs: $(VENV)/.installed docs/generated/loops.json ## Build the documentation with mkdocs build --strict
	$(PY) -m mkdocs build --strict

.PHONY: docs-check
docs-check: $(VENV)/.installed chromium docs/generated/loops.json ## Build the site and open every page in headless Chromium (errors, pictures, wide code, search, copy)
	$(PY) -m mkdocs build --strict
	$(PY) docs/browser_check.py site

# Debian's chromium drives docs-check (playwright's own browser download needs the internet)
.PHONY: chromium
chromium: ## Install Debian's chromium for docs-check, where apt-get exists and it is missing
	@if [ -n "$$CHROMIUM" ] || command -v chromium >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	  ($$sudo apt-get update -qq && $$sudo apt-get install -y -qq chromium) \
	    || echo "chromium could not be installed here: make docs-check will say how to get it"; \
	else echo "no apt-get: install Chromium yourself (or set CHROMIUM=/path) for make docs-check"; fi

.PHONY: docs-serve
docs-serve: $(VENV)/.installed ## Serve the documentation with live reload on localhost:8000
	$(PY) -m mkdocs serve

.PHONY: bench
bench: $(VENV)/.installed ## Benchmark ours against torch side by side (ratios); BENCH_ARGS='--large' adds N=1e8, BENCH_ARGS="mixture --only 'N = '" reruns some tables
	$(PY) -m benchmarks $(BENCH_ARGS)

# The peers (LitData, MosaicML streaming) pin their own dependencies: they get a venv of their
# own, with the torch of .venv (its pin), so that they neither pull a CUDA build nor change .venv.
PEERS_VENV := .venv-peers
PEERS_REPEATS ?= 5

$(PEERS_VENV)/.installed: pyproject.toml $(VENV)/.installed
	@test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	@$(PEERS_VENV)/bin/python -c 'import torch' 2>/dev/null || $(PEERS_VENV)/bin/python -m pip install -q -c $(VENV)/constraints.txt $(TORCH)
	$(PEERS_VENV)/bin/python -m pip install -q -c $(VENV)/constraints.txt -e '.[peers]'
	@touch $@

.PHONY: bench-peers
bench-peers: $(PEERS_VENV)/.installed ## LitData, MosaicML streaming, WebDataset, HF datasets vs ours, checked, in .venv-peers
	$(PEERS_VENV)/bin/python -m benchmarks.peers $(PEERS_REPEATS)
	$(PEERS_VENV)/bin/python -m benchmarks.peers_sharded $(PEERS_REPEATS)
	$(PEERS_VENV)/bin/python -m benchmarks.peers_sharded_mixture $(PEERS_REPEATS)

$(VENV)/.mutate-installed: $(VENV)/.installed
	$(PY) -m pip install -q -c $(VENV)/constraints.txt -e '.[mutate]'
	@touch $@

.PHONY: mutate
mutate: $(VENV)/.mutate-installed ## Mutation-test every sampler module against its own tests (MODULE=distributed for one; MUTATE_FLAGS=--survivors reruns the last survivors only, MUTATE_FLAGS='--functions Class.method' the mutants of what a change touched); slow, not in CI
	$(PY) mutation/run.py $(MODULE) $(MUTATE_FLAGS)

.PHONY: lint
lint: $(VENV)/.installed ## Check style with ruff
	$(PY) -m ruff check src tests benchmarks docs mutation
	$(PY) -m ruff format --check src tests benchmarks docs mutation

.PHONY: format
format: $(VENV)/.installed ## Fix what ruff can fix and format the code
	$(PY) -m ruff check --fix src tests benchmarks docs mutation
	$(PY) -m ruff format src tests benchmarks docs mutation

.PHONY: clean
clean: ## Remove the venv, caches and the built site
	rm -rf $(VENV) $(PEERS_VENV) site docs/generated mutants .pytest_cache .hypothesis .ruff_cache build dist src/*.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

.PHONY: help
help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  \033[36m%-11s\033[0m %s\n", $$1, $$2}'
