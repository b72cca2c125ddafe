# The two README commands are `make demo` and `make test`; each creates or refreshes .venv.
PYTHON ?= python3
VENV ?= .venv
CONSTRAINTS ?= constraints.txt
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-slow lint type bench clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e ".[dev]"
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/volary demo --out out/demo

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m "slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

type: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/physics.py --out out/bench

clean:
	rm -rf $(VENV) out build *.egg-info
