# Two entry points for a fresh machine: `make demo` (the main job) and `make test` (the whole suite);
# `make examples` runs every example against the built-in offline model.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install demo examples test test-typescript lint bench services clean

$(BIN)/sessionledger: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/sessionledger

demo: install
	$(BIN)/sessionledger demo

# Every example with --offline (no key, no network), each on its own SQLite file in a temporary
# directory removed afterwards; tests/e2e/test_make_examples.py runs this target.
EXAMPLES := tool_agent sentinel_facts multi_agent_branches chatbot openai_agents_session adk_agent langgraph_agent mcp_agent

examples: install
	@dir="$$(mktemp -d)" && trap 'rm -rf "$$dir"' EXIT && \
	for name in $(EXAMPLES); do \
		echo "== examples/$$name.py --offline"; \
		$(BIN)/python examples/$$name.py --offline --database-url "sqlite:///$$dir/$$name.db" || exit 1; \
	done

services:
	bash .ci/services

# The suite runs on TEST_WORKERS processes (pytest-xdist; each test file on one of them, so its
# module fixtures are made once), then the tests marked `exclusive`, which stop a shared service,
# alone. Most tests keep one core busy: on two processes a 2-core machine's 25 minutes took 16.
TEST_WORKERS ?= 2

test: install services
	$(BIN)/ruff check .
	bash .ci/typecheck $(BIN)/mypy
	bash .ci/imports $(BIN)/lint-imports
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope -m "not exclusive"
	$(BIN)/python -m pytest -m exclusive
	$(MAKE) test-typescript

# The npm package clients/typescript (sessionledger-adk): installed from its lockfile, built with
# tsc, and tested with node's test runner against a real `sessionledger serve` the tests start.
test-typescript: install
	cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error && \
		SESSIONLEDGER_BIN="$(abspath $(BIN))/sessionledger" npm test

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	bash .ci/typecheck $(BIN)/mypy
	bash .ci/imports $(BIN)/lint-imports

bench: install services
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) *.egg-info build .pytest_cache .ruff_cache .mypy_cache sessionledger.db
