# kgagents — `make install`, `make demo`, `make test` and `make ask Q="..."` (the README's Quick start).
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?= -q

# The first Python >= 3.12 found: python3.12 .. python3.14, python3, then pyenv's installs.
PYTHON ?= $(shell for c in python3.12 python3.13 python3.14 python3 $$(ls -d $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null); do \
	if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then \
	command -v $$c; break; fi; done)

.PHONY: install test test-fast lint typecheck imports-resolve lock ask demo dev tools clean

# Every package at the version CI tested: requirements.lock (made by `make lock` from pyproject.toml), installed
# as it is (--no-deps: the lock lists every package), then kgagents itself with every extra and the test tools.
LOCK := requirements.lock
EXTRAS ?= all,dev
# TORCH=cpu: torch's CPU-only build (from PyTorch's own index) instead of the lock's CUDA build, and none of the
# CUDA packages the CUDA build needs (about 5 GB less); for machines without an NVIDIA GPU.
TORCH ?=
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_VERSION = $(shell sed -n 's/^torch==\([^ ;]*\).*/\1/p' $(LOCK))
GPU_ONLY := ^(nvidia-|cuda-|triton==)

$(STAMP): pyproject.toml $(LOCK)
	@if [ -z "$(PYTHON)" ]; then echo "kgagents needs Python >= 3.12 (python3.12 on PATH)"; exit 1; fi
	@if [ -n "$(TORCH)" ] && [ "$(TORCH)" != cpu ]; then echo "TORCH takes cpu (or nothing: the lock's build)"; exit 2; fi
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@if [ "$(TORCH)" = cpu ]; then \
		$(BIN)/python -m pip install --quiet --no-deps "torch==$(TORCH_VERSION)+cpu" --index-url $(TORCH_INDEX) && \
		grep -v -E '$(GPU_ONLY)' $(LOCK) | grep -v '^torch==' > $(VENV)/requirements-cpu.lock && \
		$(BIN)/python -m pip install --quiet --no-deps -r $(VENV)/requirements-cpu.lock; \
	else \
		$(BIN)/python -m pip install --quiet --no-deps -r $(LOCK); \
	fi
	$(BIN)/python -m pip install --quiet --no-deps -e ".[$(EXTRAS)]"
	$(BIN)/python -m pip check
	@touch $(STAMP)

# Refresh the lock after a change to pyproject.toml, keeping every pin that still fits; UPGRADE=1 takes the newest
# versions the ranges allow (UPGRADE=package: that package only). Then `make test`, and commit the lock it passed.
UPGRADE ?=
lock:
	@if [ -z "$(PYTHON)" ]; then echo "kgagents needs Python >= 3.12 (python3.12 on PATH)"; exit 1; fi
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet "$$(grep -s '^uv==' $(LOCK) || echo uv)"
	$(BIN)/uv pip compile pyproject.toml --universal --python-version 3.12 --extra all --extra dev \
		$(if $(filter 1,$(UPGRADE)),--upgrade,$(if $(UPGRADE),--upgrade-package $(UPGRADE))) -o $(LOCK)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The fast tier: every test but those marked slow (servers, subprocesses, langgraph dev, database backends, the
# larger scripted runs); `make test` runs them all.
test-fast: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS) -m "not slow"

# The static checks (CI runs them before the tests): ruff's rules, mypy (pyproject.toml) and the floors of
# docs/architecture.md (pyproject's [tool.importlinter]), run through .ci/lint_imports.py so that it sees graphs/,
# nodes/, tools/, prompts/ and evals/ under the kgagents namespace.
lint: $(STAMP)
	$(BIN)/ruff check .
	PYTHON=$(BIN)/python .ci/typecheck
	$(BIN)/python .ci/lint_imports.py
	$(BIN)/basedpyright

typecheck: $(STAMP)
	PYTHON=$(BIN)/python .ci/typecheck

# What an editor sees: basedpyright (pyright with its own Node.js from PyPI) over the project must resolve every
# import (pyrightconfig.json: the five folders under kgagents through the links in .layout/, as a wheel holds them).
imports-resolve: $(STAMP)
	$(BIN)/basedpyright

ask: $(STAMP)
	@if [ -z "$(Q)" ]; then echo 'usage: make ask Q="your question" [ATTACH=file] (needs a model: see .env.example; without one, `make demo` runs a scripted example offline)'; exit 2; fi
	@$(BIN)/kgagents ask "$(Q)" $(if $(ATTACH),--attach "$(ATTACH)")

demo: $(STAMP)
	@$(BIN)/kgagents demo

tools: $(STAMP)
	@$(BIN)/kgagents tools

# langgraph dev runs one run at a time unless told otherwise: DEV_JOBS runs at once (e.g. make dev DEV_JOBS=10).
# The one-user development server: on 127.0.0.1, answering this machine only (no page but Studio's) unless the
# environment gives callers' tokens (KGAGENTS_SERVE_TOKEN / _TOKENS: README, "Sharing a server"). It keeps its
# state in ./.langgraph_api of the checkout, whose code it runs. Never add --tunnel with keys in the environment.
DEV_JOBS ?= 50
dev: $(STAMP)
	$(BIN)/langgraph dev --no-browser --n-jobs-per-worker $(DEV_JOBS)

clean:
	rm -rf $(VENV) .pytest_cache

flags: $(STAMP)  ## write kgagents/cli/workflow_flags.json again (the CLI's context flags) after changing a context
	$(BIN)/python -c "from kgagents.cli.flags import write; print(write())"
