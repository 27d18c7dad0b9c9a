# make run / make test work on a fresh clone: both install into .venv first when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONFIG ?= config.yaml
# The agent CLIs the real-client tests drive (Claude Code, Codex), pinned in package.json / package-lock.json
NPM := $(shell command -v npm 2>/dev/null)
NODE_STAMP := node_modules/.installed

TRACES ?= ../shared/traces

# Debian's Chromium for the dashboard's browser test (tests/test_ui.py, Playwright drives it): installed when missing,
# as root with apt-get; elsewhere the test skips and says why.
CHROMIUM := /usr/bin/chromium

.PHONY: install agents browser run test bench soak eval clean

install: $(STAMP) agents browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,eval]'
	touch $(STAMP)

# npm ci installs the lockfile's exact versions; without npm the CLIs are skipped (and so are their tests)
ifneq ($(NPM),)
agents: $(NODE_STAMP)
else
agents:
	@echo "npm not found: the agent CLIs (package.json) are not installed; tests/test_real_agents.py will skip"
endif

browser:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null \
	    || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null; } \
	    || echo "could not install chromium: the dashboard's browser test will skip"; \
	  else echo "chromium not found (install Debian's chromium package): the dashboard's browser test will skip"; fi; }

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

run: $(STAMP)  # the proxy alone: the agent CLIs are for the tests
	$(BIN)/workset serve --config $(CONFIG)

# The suite runs twice: on SQLite (the embedded default), then with every store in PostgreSQL at $(TEST_PG) (each
# test's store a schema of its own; tests/stores.py). Without a PostgreSQL there, the second run is skipped and said
# so, unless REQUIRE_PG=1 (CI), which fails instead.
TEST_PG ?= postgresql://postgres@127.0.0.1:5432/test
REQUIRE_PG ?= 0

test: install
	$(BIN)/python -m pytest -q
	@if $(BIN)/python -c "import psycopg; psycopg.connect('$(TEST_PG)', connect_timeout=5).close()" 2>/dev/null; then \
	  echo "--- the suite again, every store in PostgreSQL ($(TEST_PG))"; \
	  WORKSET_TEST_STORE='$(TEST_PG)' $(BIN)/python -m pytest -q; \
	elif [ "$(REQUIRE_PG)" = 1 ]; then echo "PostgreSQL not reachable at $(TEST_PG) (REQUIRE_PG=1)"; exit 1; \
	else echo "PostgreSQL not reachable at $(TEST_PG): the suite ran on SQLite only"; fi

bench: install
	$(BIN)/python -m bench.latency
	$(BIN)/python -m bench.adversarial
	$(BIN)/python -m bench.stall
	$(BIN)/python -m bench.records
	$(BIN)/python -m bench.replicas

# Issue 9's hostile-input and load suite at full size (make test runs the same code smaller): 10,000 fuzzed
# requests; then 50 concurrent sessions x 30 turns, 20 same-key conversations, kill -9 x 5 under load.
soak: install
	$(BIN)/python -m bench.fuzz --requests 10000
	$(BIN)/python -m bench.load --sessions 50 --turns 30 --kills 5
	$(BIN)/python -m bench.backlog
	$(BIN)/python -m bench.store_faults

# Every preset and the baselines on the shared traces. tau-dev runs under a 5,500-token budget: small enough to
# force compaction on its longer runs (its 14 tool definitions alone take 1,366 tokens, the policy prompt 1,252).
# Then the built-in probe scenarios (proxy/evaluate/scenarios), and swe-dev as a text-based agent sends it
# (observations as user messages), the default policy only, to keep the whole run within about 15 minutes.
eval: install
	$(BIN)/workset eval $(TRACES)/swe-dev.jsonl.gz --baselines --parts --json docs/eval-swe-dev.json --plot docs/eval-swe-dev.png
	$(BIN)/workset eval $(TRACES)/tau-dev.jsonl.gz --baselines --parts --budget 5500 --json docs/eval-tau-dev.json --plot docs/eval-tau-dev.png
	$(BIN)/workset eval scenarios --baselines --json docs/eval-scenarios.json --plot docs/eval-scenarios.png
	$(BIN)/workset eval $(TRACES)/swe-dev.jsonl.gz --text-agent --baselines --policy default --json docs/eval-swe-dev-text.json

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
