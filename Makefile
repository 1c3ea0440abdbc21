# Set-up and everyday tasks. `make demo` and `make test` are the README's two commands: each
# creates (or reuses) .venv, so nothing else needs installing first.
#
# The runtime extra pins torch==2.9.0 (with its CUDA libraries, ~7 GB). It is installed with uv,
# whose cache hard-links packages a machine already has: a fresh clone sets up in seconds after
# the first time, and re-running on an existing .venv does nothing.

PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.xlaprof-setup
export PJRT_DEVICE ?= CPU

.PHONY: setup browser demo test lint typecheck format bench samples golden clean

# The compiled decoder core (xlaprof/parse/xplane/_native.c) is built by the editable install;
# after an edit of its source it is rebuilt in place. Where it cannot be (no C compiler) the
# numpy decoder runs and says so once.
NATIVE_SRC := xlaprof/parse/xplane/_native.c
NATIVE_STAMP := build/.xlaprof-native

setup: $(STAMP) $(NATIVE_STAMP)

$(NATIVE_STAMP): $(NATIVE_SRC) setup.py $(STAMP)
	@$(BIN)/python setup.py -q build_ext --inplace >/dev/null 2>&1 || echo "xlaprof: the compiled decoder did not build; the numpy decoder will run"
	@mkdir -p build && touch $@

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@test -x $(BIN)/uv || $(BIN)/pip install --quiet --disable-pip-version-check uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[runtime,dev,bench]'
	@# Bytecode for every installed package, once: where PYTHONDONTWRITEBYTECODE is set (as on
	@# this project's machines) Python never writes .pyc files, so each process that imports
	@# torch_xla would compile ~6 s of sources again; the tests start ~150 such processes.
	@$(BIN)/python -m compileall -q -j 0 $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') >/dev/null 2>&1 || true
	@touch $(STAMP)

demo: setup
	$(BIN)/xlaprof demo

# The HTML report is tested in a real headless browser: Debian's chromium (root installs it).
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# The type check runs first: it takes well under a minute from a cold cache. The tests run on two
# workers (most of their time is torch_xla jobs in subprocesses): about 7 minutes on a quiet
# 2-core machine. A file's tests stay on one worker, so its module fixtures are made once.
test: setup browser typecheck
	@$(BIN)/python -m compileall -q xlaprof examples tests >/dev/null 2>&1 || true
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# mypy, strict, on the whole package: [tool.mypy] in pyproject.toml says what it checks.
typecheck: setup
	$(BIN)/mypy

format: setup
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: setup
	$(BIN)/python benchmarks/run_all.py

samples: setup
	$(BIN)/python sample_traces/regenerate.py

# Rewrite the renderers' whole outputs kept in tests/report/golden/ (after a change meant to
# change them, or `make samples`); review them with `git diff tests/report/golden/`.
golden: setup
	UPDATE_GOLDEN=1 PJRT_DEVICE=CPU $(BIN)/python -m pytest -q tests/report/test_golden.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache runs
