# Quick start: `make bench` (verdict table on the embedded default) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
# A prebuilt llama-cpp-python wheel next to the checkout saves a ~12 minute compile.
WHEELS := $(wildcard ../shared/wheels)
FIND_LINKS := $(if $(WHEELS),--find-links $(WHEELS),)

.PHONY: bench test lint install

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(FIND_LINKS) -e '.[all,dev]'
	touch $@

install: $(VENV)/.installed

bench: $(VENV)/.installed
	$(PY) -m pytest benchmarks/ --backend=mlx -p no:cacheprovider

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
