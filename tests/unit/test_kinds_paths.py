"""The served-path rule (tritonkit.kinds.paths) and its copies that run inside Triton.

The copies live in files Triton loads (they cannot import tritonkit); these tests hold them to the
library's rule on one table of server paths.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.unit._triton_side import load_backend_module
from tritonkit.errors import SpecError
from tritonkit.kinds.paths import (
    DEFAULT_SERVING_ROOT,
    check_serving_root,
    local_path,
    served_path,
    serving_root_of,
)
from tritonkit.triton_side import BACKENDS_DIR, TRTLLM_MODELS_DIR

#: server paths named in model ``decoder``'s files, none of which exists on this machine
SERVER_PATHS = (
    "/models/decoder/1/hf_model",
    "/srv/x/decoder/2/lora/a",
    "/models/decoder/1",
    "/models/decoder/3/engine/rank0.engine",
    "/mnt/decoder/decoder/1/tokenizer",
    "/models/other/1/hf_model",
    "/weights/llama",
    "/models/decoder/latest/x",
)


def test_local_path_maps_any_version_of_the_model_onto_its_directory_when_the_server_path_names_it(
    tmp_path: Path,
) -> None:
    model_dir = tmp_path / "repo" / "decoder"
    assert local_path("/models/decoder/3/engine", model_dir=model_dir) == model_dir / "3" / "engine"
    assert local_path("/mnt/decoder/decoder/1/tok", model_dir=model_dir) == model_dir / "1" / "tok"
    assert local_path("/models/other/1/hf_model", model_dir=model_dir) is None
    assert local_path("/models/decoder/latest/x", model_dir=model_dir) is None


def test_served_path_writes_the_path_local_path_reads_back_whatever_the_serving_root(tmp_path: Path) -> None:
    model_dir = tmp_path / "decoder"
    for root in (DEFAULT_SERVING_ROOT, "/srv/repo/", "/"):
        path = served_path(root, "decoder", 2, "lora", "a")
        assert path.startswith("/") and "//" not in path
        assert local_path(path, model_dir=model_dir) == model_dir / "2" / "lora" / "a"


def test_serving_root_of_reads_back_the_root_served_path_wrote_and_none_where_local_path_maps_nothing(
    tmp_path: Path,
) -> None:
    for root in (DEFAULT_SERVING_ROOT, "/srv/repo", "/mnt/decoder"):
        assert serving_root_of(served_path(root, "decoder", 1, "engine"), model="decoder") == root
    model_dir = tmp_path / "decoder"
    for path in SERVER_PATHS:
        if serving_root_of(path, model="decoder") is None:
            assert local_path(path, model_dir=model_dir) is None
    assert serving_root_of("engine/rank0.engine", model="decoder") is None


def test_check_serving_root_refuses_a_relative_or_escaping_root() -> None:
    assert check_serving_root("/models/") == "/models"
    for bad in ("", "models", "/models/../etc", "C:\\models"):
        with pytest.raises(SpecError):
            check_serving_root(bad)


def test_vllm_backend_copy_of_the_served_path_rule_agrees_with_the_library(tmp_path: Path) -> None:
    backend = load_backend_module(
        BACKENDS_DIR / "vllm" / "engine_config.py", "tritonkit_vllm_backend_rule_under_test"
    )
    model_dir = tmp_path / "repo" / "decoder"
    version_dir = model_dir / "1"
    for server_path in SERVER_PATHS:
        expected = local_path(server_path, model_dir=model_dir)
        if expected is not None:
            expected.mkdir(parents=True, exist_ok=True)  # the copy maps only onto what exists
        mapped, changed = backend.map_local_path(server_path, model_name="decoder", version_dir=version_dir)
        assert (Path(mapped) if changed else None) == expected, server_path


def test_trtllm_models_copy_of_the_served_path_rule_agrees_with_the_library(tmp_path: Path) -> None:
    path = TRTLLM_MODELS_DIR / "served_paths.py"
    spec = importlib.util.spec_from_file_location("trtllm_served_paths", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    served_dir = module.served_dir
    model_dir = tmp_path / "repo" / "decoder"
    for server_path in SERVER_PATHS:
        expected = local_path(server_path, model_dir=model_dir)
        got = served_dir(server_path, str(model_dir), 1)
        assert (Path(got) if got != server_path else None) == expected, server_path
