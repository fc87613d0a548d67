# kgagents — the two set-up commands are `make test` and `make ask Q="..."`.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?= -q

# The first Python >= 3.12 found: python3.12 .. python3.14, python3, then pyenv's installs.
PYTHON ?= $(shell for c in python3.12 python3.13 python3.14 python3 $$(ls -d $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null); do \
	if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then \
	command -v $$c; break; fi; done)

.PHONY: install test ask demo dev tools clean

$(STAMP): pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "kgagents needs Python >= 3.12 (python3.12 on PATH)"; exit 1; fi
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	@touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

ask: $(STAMP)
	@if [ -z "$(Q)" ]; then echo 'usage: make ask Q="your question" [ATTACH=file]'; exit 2; fi
	@$(BIN)/kgagents ask "$(Q)" $(if $(ATTACH),--attach "$(ATTACH)")

demo: $(STAMP)
	@$(BIN)/kgagents demo

tools: $(STAMP)
	@$(BIN)/kgagents tools

# langgraph dev runs one run at a time unless told otherwise: DEV_JOBS runs at once (e.g. make dev DEV_JOBS=10).
DEV_JOBS ?= 50
dev: $(STAMP)
	$(BIN)/langgraph dev --no-browser --n-jobs-per-worker $(DEV_JOBS)

clean:
	rm -rf $(VENV) .pytest_cache
