# Two entry points that work on a fresh machine with only Python 3.10+ and git:
#   make demo   - set up, then run the main job on a copy of example-repo/
#   make test   - set up, then run the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint fuzz bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash example-repo/demo.sh

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

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

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(BENCH_VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache

# Long property-based runs: every hypothesis property with at least 2,000 examples (about
# three minutes on two cores), random bytes at every state file and random output at the
# redactor and its sinks included; the per-property example counts are printed at the end.
fuzz: $(STAMP)
	VERIFYGATE_FUZZ=1 $(BIN)/python -m pytest -n 2 -q -p no:verifygate \
		--hypothesis-show-statistics \
		tests/reliability/test_bad_input.py tests/reliability/test_file_names.py \
		tests/reliability/test_environment.py tests/reliability/test_fuzz_state.py
