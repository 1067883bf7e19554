# Two entry points that work on a fresh machine with Python 3.10+, git, Node.js and npm:
#   make demo   - set up, then run the main job on a copy of example-repo/
#   make test   - set up (the virtualenv, and the pinned agent CLIs the end-to-end suite
#                 drives), then run the whole test suite
# and the end-to-end suite alone, and the documentation site:
#   make e2e    - install the pinned agent CLIs, then run the end-to-end suite
#   make docs   - build the site into site/ (MkDocs, --strict: a broken link or anchor fails)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
E2E_DIR := .e2e
E2E_STAMP := $(E2E_DIR)/.installed

.PHONY: demo test e2e lint fuzz bench bench-replay docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash example-repo/demo.sh

test: $(STAMP) $(E2E_STAMP)
	$(BIN)/python -m pytest -n 2 -q

# The end-to-end suite (tests/e2e) drives the real Claude Code, Codex CLI and Gemini CLI, and
# the MCP Inspector, at the versions tests/e2e/package.json pins, against a scripted model on
# 127.0.0.1. npm installs them into .e2e/ (about 1 GB), again only when the pins change.
# Without node or npm this fails, loudly: the suite never passes by not running.

$(E2E_STAMP): tests/e2e/package.json tests/e2e/package-lock.json
	@command -v node >/dev/null || { echo "make e2e: node is not on PATH: the end-to-end suite needs Node.js and npm" >&2; exit 1; }
	@command -v npm >/dev/null || { echo "make e2e: npm is not on PATH: the end-to-end suite needs Node.js and npm" >&2; exit 1; }
	mkdir -p $(E2E_DIR)
	cp tests/e2e/package.json tests/e2e/package-lock.json $(E2E_DIR)/
	cd $(E2E_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

e2e: $(STAMP) $(E2E_STAMP)
	$(BIN)/python -m pytest -n 2 -q -m e2e tests/e2e

# The benchmarks measure the product as users install it: a regular (not editable) install in
# an environment of its own, beside only the peers it is compared with. This repository's test
# tools stay out: hypothesis's pytest plugin alone adds about 50 ms to every pytest run.
BENCH_VENV := .venv-bench

bench:
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet lefthook pre-commit '.[xdist]'
	$(BENCH_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall .
	$(BENCH_VENV)/bin/python bench/run.py

# A project's real history, replayed commit by commit for verifygate, prek, pre-commit and
# lefthook (bench/replay.py): REPO is a clone to replay, SUITE its gates (default: the suite
# for pypa/packaging), COMMITS how many; FLAGS=--workflow for agent stop -> commit -> push -> CI.
REPO ?=
SUITE ?= bench/suites/packaging.toml
COMMITS ?= 40
FLAGS ?=

# The replay's environment holds the project's own test tools (hypothesis among them), so it is
# not the one `make bench` measures pytest start-up in.
REPLAY_VENV := .venv-replay
# The checkers at the versions pypa/packaging's .pre-commit-config.yaml pins at the replayed
# head: a newer ruff finds what the project's own did not, and every commit would fail on it.
REPLAY_TOOLS ?= ruff==0.16.0 mypy==2.3.0

bench-replay:
	@test -n "$(REPO)" || { echo "make bench-replay: set REPO=path/to/a/clone" >&2; exit 2; }
	$(PYTHON) -m venv $(REPLAY_VENV)
	$(REPLAY_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(REPLAY_VENV)/bin/python -m pip install --quiet lefthook pre-commit prek '.[xdist]' \
		$(REPLAY_TOOLS) pytest pretend hypothesis tomli_w codespell
	$(REPLAY_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall .
	$(REPLAY_VENV)/bin/python bench/replay.py --repo "$(REPO)" --suite "$(SUITE)" \
		--commits $(COMMITS) $(FLAGS)

# The docs extra goes into the same virtualenv: docs/hooks.py imports the package to render the
# reference pages (the command line, pytest options, codes, report keys, hooks, the API).
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check src tests docs/hooks.py
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(REPLAY_VENV) $(E2E_DIR) build dist site src/*.egg-info .pytest_cache \
		.mypy_cache .ruff_cache

# Long property-based runs: every hypothesis property with at least 2,000 examples (about
# three minutes on two cores), random bytes at every state file and random output at the
# redactor and its sinks included; the per-property example counts are printed at the end.
fuzz: $(STAMP)
	VERIFYGATE_FUZZ=1 $(BIN)/python -m pytest -n 2 -q -p no:verifygate \
		--hypothesis-show-statistics \
		tests/reliability/test_bad_input.py tests/reliability/test_file_names.py \
		tests/reliability/test_environment.py tests/reliability/test_fuzz_state.py
