# `make up` and `make test` are the whole set-up on a fresh machine (README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

# Python writes and reuses bytecode for Fleet's own modules (in the gitignored __pycache__), even
# where the environment sets PYTHONDONTWRITEBYTECODE: an editable install compiles nothing, so
# without it every process compiles Fleet from source at each start, about 0.5 s of CPU a role
# process and 10 s of each test worker's collection (18 s instead of 8).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: up test lint typecheck layers unit explore browser install clean wheel wheelhouse image docs bench-compare

# The first install takes about a minute: it says what it does, step by step.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Fleet needs Python 3.11+")'
	@test -x $(BIN)/python || { echo "make: creating the virtualenv $(VENV) ($(PYTHON))"; $(PYTHON) -m venv $(VENV); }
	@echo "make: installing Fleet and its dependencies into $(VENV) (pip install -e '.[dev]'; about a minute the first time)"
	@$(BIN)/python -m pip install -q -e '.[dev]'
	@echo "make: installed ($(BIN)/fleet)"
	@touch $(STAMP)

install: $(STAMP)

# make up FRESH=1: start clean (fleet up --fresh: the embedded Redis' data of the last run removed).
up: $(STAMP)
	$(BIN)/fleet up $(if $(filter-out 0,$(FRESH)),--fresh)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The import contracts in pyproject.toml: the layers of DESIGN.md, no cycles, faces kept.
layers: $(STAMP)
	$(BIN)/lint-imports

# Four workers on two cores: much of the suite's time is spent waiting on the processes it
# starts (leases, tolerations, simulated runtimes), so more workers than cores overlap those waits
# (2026-11-29, 2,199 tests: 14.5 min with three workers, the cores 76% busy; 12.4 min with four).
test: lint typecheck layers
	$(BIN)/pytest -n 4 --dist worksteal --durations=15

# The image's inputs (deploy/Dockerfile installs exactly these): Fleet's wheel, then the wheels of
# everything it depends on, so that an install needs no index (pip's cache serves repeated builds).
DIST ?= dist
WHEEL := $(DIST)/fleet-$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)-py3-none-any.whl

wheel: $(STAMP)
	$(BIN)/python -m pip wheel -q --no-deps -w $(DIST) .

wheelhouse: wheel
	$(BIN)/python -m pip wheel -q -w $(DIST)/wheelhouse $(WHEEL)

IMAGE ?= fleet:dev
image:
	docker build -f deploy/Dockerfile -t $(IMAGE) .

# One benchmark on two commits, alternately, in one sitting (bench/compare.py):
#   make bench-compare BASE=<commit> [HEAD=<commit>] [PAIRS=3] [BENCH="bench.dispatch_bench --no-failover"]
BENCH ?= bench.dispatch_bench --no-failover
PAIRS ?= 3
HEAD ?= WORKTREE
bench-compare: $(STAMP)
	$(BIN)/python -m bench.compare $(BASE) --head $(HEAD) --pairs $(PAIRS) -- $(BENCH)

# Documents generated from the code (a test fails when one is not current).
docs: $(STAMP)
	$(BIN)/python -c 'import sys; from fleet.jobs.lifecycle import table; sys.stdout.write(table())' > docs/lifecycle.md

unit: $(STAMP)
	$(BIN)/pytest -m 'not integration'

# The console in a real headless Chromium on `fleet up` (Debian's chromium and chromium-driver:
# apt-get install chromium chromium-driver). `make test` runs them too; this runs only them.
browser: $(STAMP)
	$(BIN)/pytest -m browser

# The property tests with fresh draws (`make test` replays fixed ones, tests/conftest.py).
explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(BIN)/pytest -n 3 $$(grep -rl hypothesis tests --include='test_*.py')

clean:
	rm -rf $(VENV) $(DIST) .mypy_cache .pytest_cache .ruff_cache .hypothesis
