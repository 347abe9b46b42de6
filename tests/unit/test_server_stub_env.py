"""The stub-environment guard: which environments Python stages run in, and what is refused.

The environments are real venvs made here (``python -m venv --without-pip``) whose numpy is a
stand-in package with only a ``__version__`` (installing real numpy 2 would take minutes and the
network): the guard reads nothing else from it. The stub's refusal of real numpy 2 was measured
on the GPU box and here (issue #33).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritonkit.errors import ServerError, StubEnvironmentError
from tritonkit.server import _stub_env
from tritonkit.server._install import running_python_version

PY = running_python_version()


def make_env(root: Path, numpy_version: str | None) -> Path:
    """A venv of the running Python whose ``import numpy`` reports ``numpy_version``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    if numpy_version is not None:
        site = root / "lib" / f"python{PY}" / "site-packages" / "numpy"
        site.mkdir(parents=True)
        (site / "__init__.py").write_text(f'__version__ = "{numpy_version}"\n')
    return root


def write_model(repo: Path, name: str, body: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(f'name: "{name}"\n{body}\n')


def server_env(env_dir: Path) -> dict[str, str]:
    return {
        "PATH": f"{env_dir / 'bin'}:{os.environ.get('PATH', '')}",
        "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH", ""),
    }


@pytest.fixture(scope="module")
def numpy2_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_env(tmp_path_factory.mktemp("np2") / "venv", "2.1.0")


@pytest.fixture(scope="module")
def numpy1_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_env(tmp_path_factory.mktemp("np1") / "venv", "1.26.4")


def _found(python: str = PY, numpy: str | None = "1.26.4") -> _stub_env.StubEnvironment:
    return _stub_env.StubEnvironment(
        python3=Path("/env/bin/python3"), python=python, prefix="/env", numpy=numpy
    )


LIB = Path("/usr/lib/libpython.so")


@pytest.mark.parametrize(
    ("found", "library", "wrong", "fix"),
    [
        (_found(numpy="1.26.4"), LIB, [], []),
        (_found(numpy="2.1.0"), LIB, ["numpy 2.1.0"], ["/env/bin/pip install 'numpy>=1.24,<2'"]),
        (_found(numpy="2.0.0rc1"), LIB, ["numpy 2.0.0rc1"], ["numpy>=1.24,<2"]),
        (_found(numpy=None), LIB, ["no numpy"], ["numpy>=1.24,<2"]),
        (_found(python="3.12"), LIB, ["Python 3.12", "has a stub for 3.12"], ["run tritonkit itself"]),
        (_found(python="3.14"), LIB, ["no stub for Python 3.14"], [f"made from Python {PY}"]),
        (_found(), None, [f"libpython{PY}.so.1.0"], ["--enable-shared"]),
    ],
)
def test_problems_names_what_is_wrong_and_the_fix(
    found: _stub_env.StubEnvironment, library: Path | None, wrong: list[str], fix: list[str]
) -> None:
    got = _stub_env.problems(found, stub_python=PY, stubs=[PY, "3.12"], library=library)
    assert bool(got) == bool(wrong) and len(got) <= 1
    text = " ".join(w for w, _ in got)
    hints = " ".join(f for _, f in got)
    assert all(w in text for w in wrong), text
    assert all(f in hints for f in fix), hints


def test_stage_environments_finds_python_stages_and_their_environments(
    tmp_path: Path, numpy1_env: Path
) -> None:
    write_model(tmp_path, "py", 'backend: "python"')
    write_model(tmp_path, "onnx", 'platform: "onnxruntime_onnx"')
    write_model(tmp_path, "ens", 'platform: "ensemble"')
    write_model(
        tmp_path,
        "llm",
        f'backend: "vllm"\nparameters {{ key: "EXECUTION_ENV_PATH" '
        f'value {{ string_value: "{numpy1_env}" }} }}',
    )
    write_model(
        tmp_path,
        "packed",
        'backend: "python"\nparameters { key: "EXECUTION_ENV_PATH" '
        'value { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }',
    )
    (tmp_path / "packed" / "env.tar.gz").write_bytes(b"")
    assert _stub_env.stage_environments(tmp_path) == {"": ["onnx", "py"], str(numpy1_env): ["llm"]}


def test_stage_environments_reads_the_chosen_config_name(tmp_path: Path) -> None:
    write_model(tmp_path, "m", 'platform: "ensemble"')
    (tmp_path / "m" / "configs").mkdir()
    (tmp_path / "m" / "configs" / "cpu.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    assert _stub_env.stage_environments(tmp_path) == {}
    assert _stub_env.stage_environments(tmp_path, model_config_name="cpu") == {"": ["m"]}


def test_probe_reads_version_and_numpy_of_a_real_venv(numpy2_env: Path) -> None:
    found = _stub_env.probe(numpy2_env / "bin" / "python3", {"PYTHONPATH": "/elsewhere", "PATH": "/usr/bin"})
    assert found is not None
    assert (found.python, found.numpy) == (PY, "2.1.0")


def test_refuse_raises_with_the_fix_when_path_python_has_numpy_2(tmp_path: Path, numpy2_env: Path) -> None:
    write_model(tmp_path, "add", 'backend: "python"')
    with pytest.raises(StubEnvironmentError) as caught:
        _stub_env.refuse_unusable_environments(tmp_path, server_env(numpy2_env), stub_python=PY, stubs=[PY])
    assert isinstance(caught.value, ServerError)
    assert "numpy 2.1.0" in str(caught.value) and "models add" in str(caught.value)
    assert "pip install 'numpy>=1.24,<2'" in (caught.value.hint or "")


def test_refuse_raises_for_a_vllm_env_with_numpy_2(
    tmp_path: Path, numpy1_env: Path, numpy2_env: Path
) -> None:
    write_model(
        tmp_path,
        "llm",
        f'backend: "vllm"\nparameters {{ key: "EXECUTION_ENV_PATH" '
        f'value {{ string_value: "{numpy2_env}" }} }}',
    )
    with pytest.raises(StubEnvironmentError, match=f"environment {numpy2_env}; models llm"):
        _stub_env.refuse_unusable_environments(tmp_path, server_env(numpy1_env), stub_python=PY, stubs=[PY])


def test_refuse_passes_when_numpy_is_1(tmp_path: Path, numpy1_env: Path) -> None:
    write_model(tmp_path, "add", 'backend: "python"')
    _stub_env.refuse_unusable_environments(tmp_path, server_env(numpy1_env), stub_python=PY, stubs=[PY])


def test_refuse_probes_nothing_when_no_model_runs_in_the_stub(tmp_path: Path) -> None:
    write_model(tmp_path, "ens", 'platform: "ensemble"')
    _stub_env.refuse_unusable_environments(tmp_path, {"PATH": "/nonexistent"}, stub_python="9.9", stubs=[])


def test_refuse_names_a_python_version_the_stub_was_not_built_for(tmp_path: Path, numpy1_env: Path) -> None:
    write_model(tmp_path, "add", 'backend: "python"')
    with pytest.raises(StubEnvironmentError, match="built for Python 3.99"):
        _stub_env.refuse_unusable_environments(
            tmp_path, server_env(numpy1_env), stub_python="3.99", stubs=[PY]
        )
