# `make up` and `make test` are the whole set-up on a fresh machine (README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: up test lint typecheck layers unit explore install clean wheel wheelhouse image

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Fleet needs Python 3.11+")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

up: $(STAMP)
	$(BIN)/fleet up

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The import contracts in pyproject.toml: the layers of DESIGN.md, no cycles, faces kept.
layers: $(STAMP)
	$(BIN)/lint-imports

# Three workers on two cores: most of the suite's time is spent waiting on the processes it
# starts (leases, tolerations, simulated runtimes), so a third worker overlaps those waits
# (1,920 s of tests: 15 min with two workers, 11.5 min with three).
test: lint typecheck layers
	$(BIN)/pytest -n 3 --dist worksteal --durations=15

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

unit: $(STAMP)
	$(BIN)/pytest -m 'not integration'

# The property tests with fresh draws (`make test` replays fixed ones, tests/conftest.py).
explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(BIN)/pytest -n 3 $$(grep -rl hypothesis tests --include='test_*.py')

clean:
	rm -rf $(VENV) $(DIST) .mypy_cache .pytest_cache .ruff_cache .hypothesis
