# Quick start: `make bench` (verdict table on the embedded default) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
# The newest python3.1x (3.11 or newer) on PATH; `make test PYTHON=python3.12` picks one.
PYTHON ?= $(shell for v in 3.14 3.13 3.12 3.11; do command -v python$$v >/dev/null 2>&1 && python$$v -c '' 2>/dev/null && { echo python$$v; exit; }; done; command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && echo python3)
GOOD_PYTHON := import sys; sys.exit(sys.version_info < (3, 11))
# A prebuilt llama-cpp-python wheel next to the checkout saves a ~12 minute compile.
WHEELS := $(wildcard ../shared/wheels)
FIND_LINKS := $(if $(WHEELS),--find-links $(WHEELS),)

.PHONY: bench sweeps test lint install fresh-install slow gate-act

NEED_PYTHON = brew install python@3.12 (or any Python 3.11+), then: make $(or $(MAKECMDGOALS),install) PYTHON=python3.12
PYVER := $(if $(PYTHON),$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null))

# The venv is made by $(PYTHON); one made by another Python (too old, or not the one asked for) is rebuilt.
$(VENV)/.python-$(PYVER):
	@test -n "$(PYTHON)" || { echo "make: no Python 3.11 or newer on PATH (a Mac's python3 is 3.9): $(NEED_PYTHON)" >&2; exit 2; }
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "make: PYTHON=$(PYTHON) is not found: $(NEED_PYTHON)" >&2; exit 2; }
	@$(PYTHON) -c '$(GOOD_PYTHON)' || { echo "make: $(PYTHON) is $$($(PYTHON) -V 2>&1); pytest-specdec needs 3.11 or newer: $(NEED_PYTHON)" >&2; exit 2; }
	@if test -d $(VENV); then echo "make: $(VENV) has no record of being made by Python $(PYVER) ($(PYTHON)): rebuilding it"; rm -rf $(VENV); fi
	$(PYTHON) -m venv $(VENV)
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.python-$(PYVER)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(FIND_LINKS) -e '.[all,dev]'
	touch $@

install: $(VENV)/.installed

# The document's claims on the embedded default, a few minutes; the long sweeps are `make sweeps`.
# It keeps the whole run in bench-results.json: `pytest-specdec submit bench-results.json` shares it.
bench: $(VENV)/.installed
	$(PY) -m pytest benchmarks/ --backend=mlx -p no:cacheprovider -m "not sweep" --specdec-json=bench-results.json

# γ, temperature, context and concurrency sweeps: long (the context sweep alone can take hours on a
# CPU); each run says its expected duration first, from this machine's earlier runs.
sweeps: $(VENV)/.installed
	$(PY) -m pytest benchmarks/ --backend=mlx -p no:cacheprovider -m sweep

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/zizmor --offline --persona pedantic --quiet .github/workflows/
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

# The coverage gate: the suite reached 90.0 % of pytest_specdec's lines, subprocesses counted
# (coverage's patch = subprocess: specdec, pytester's subprocess runs, stand-in servers).
COVERAGE_MIN ?= 80

test: lint
	$(VENV)/bin/pytest --cov --cov-report=term --cov-fail-under=$(COVERAGE_MIN) --durations=25

# Gemma 3 270M, real servers and old-environment workers: minutes each on a CPU, so outside `make test`
# (one of each kind stays in it). .ci/run runs this and gate-act after `make test`.
slow: $(VENV)/.installed
	$(VENV)/bin/pytest -m slow -p no:cacheprovider --durations=10

# Every nightly-gate scenario under act (host mode, stand-in GitHub pieces); `make test` keeps one.
gate-act: $(VENV)/.installed
	$(VENV)/bin/pytest -m act -p no:cacheprovider --durations=10

# A new user's first hour from nothing: fresh venvs on Python 3.11 and 3.12 resolving from the package index,
# then the README's Install block and `make bench` (network; about 12 minutes a Python here).
fresh-install: $(VENV)/.installed
	$(VENV)/bin/pytest tests/test_fresh_install.py -m fresh_install -s
