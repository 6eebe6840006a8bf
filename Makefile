# Two entry points for a fresh machine: `make demo` (the main job) and `make test` (the whole suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install demo test lint bench services clean

$(BIN)/sessionledger: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/sessionledger

demo: install
	$(BIN)/sessionledger demo

services:
	bash .ci/services

test: install services
	$(BIN)/ruff check .
	bash .ci/typecheck $(BIN)/mypy
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	bash .ci/typecheck $(BIN)/mypy

bench: install services
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) *.egg-info build .pytest_cache .ruff_cache .mypy_cache sessionledger.db
