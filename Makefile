# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates/refreshes the local venv and installs what it needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tritonkit-installed
PYTEST_ARGS ?=

.PHONY: venv system-deps lint typecheck unit integration test demo build validate serve clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[all,dev]'
	touch $(STAMP)

# Debian packages some integration tests need (nginx for the TLS gateway, openssl for its test CA).
system-deps:
	@bash scripts/system-deps.sh

lint: venv
	$(VENV)/bin/ruff check tritonkit tests benchmarks ensembles

typecheck: venv
	$(VENV)/bin/mypy

# pytest exits 5 when it collected nothing: that is not a failure of the build.
test: venv system-deps lint typecheck
	$(VENV)/bin/pytest $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; rc=0; fi; exit $$rc

unit: venv
	$(VENV)/bin/pytest -m "not integration" $(PYTEST_ARGS)

integration: venv system-deps
	$(VENV)/bin/pytest -m integration $(PYTEST_ARGS)

demo: venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) ensembles/demo.py

# model_repository/ is generated: --force lets a rebuild replace version 1 after a stage was edited.
build: venv
	$(VENV)/bin/tritonkit build ensembles/vlm.yaml -o model_repository --force
	$(VENV)/bin/tritonkit build ensembles/arr_coc.yaml -o model_repository --force
	$(VENV)/bin/tritonkit build ensembles/densenet.yaml -o model_repository --force

validate: venv
	$(VENV)/bin/tritonkit validate model_repository

serve: build
	$(VENV)/bin/tritonkit serve model_repository

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
