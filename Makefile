# make run / make test work on a fresh clone: both install into .venv first when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONFIG ?= config.yaml

.PHONY: install run test bench eval clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: install
	$(BIN)/workset serve --config $(CONFIG)

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python -m bench.latency

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
