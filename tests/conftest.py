"""Shared fixtures.

Integration tests share one real tritonserver serving the example repository for the whole
session (starting Triton costs seconds on a 2-core box); tests that need special server flags
start their own through ``triton_server_factory``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENSEMBLES = ROOT / "ensembles"
#: the unary pipelines: what an Azure ML managed endpoint (HTTP /infer only) can serve
EXAMPLE_SPECS = ("densenet.yaml", "vlm.yaml", "arr_coc.yaml")
#: their streaming twins (decoupled decoders), built on top: gRPC streaming and generate_stream
STREAMING_SPECS = ("vlm_stream.yaml", "arr_coc_stream.yaml")


@pytest.fixture(scope="session")
def example_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unary example pipelines (EXAMPLE_SPECS) built into a fresh repository, once a session."""
    from tritonkit.repository import build_spec

    out = tmp_path_factory.mktemp("example") / "model_repository"
    for spec in EXAMPLE_SPECS:
        build_spec(ENSEMBLES / spec, out)
    return out


@pytest.fixture(scope="session")
def streaming_example_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every example pipeline, the streaming ones included (what `make build` writes), once a session."""
    from tritonkit.repository import build_spec

    out = tmp_path_factory.mktemp("example-streaming") / "model_repository"
    for spec in (*EXAMPLE_SPECS, *STREAMING_SPECS):
        build_spec(ENSEMBLES / spec, out)
    return out


@pytest.fixture(scope="session")
def triton_server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """Start real local tritonservers; every one started is stopped at the end of the session."""
    from tritonkit.server import LocalTritonServer

    started: list[Any] = []

    def start(repository: Path, **kwargs: Any) -> Any:
        server = LocalTritonServer(repository, **kwargs)
        server.start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture(scope="session")
def example_server(streaming_example_repository: Path, triton_server_factory: Callable[..., Any]) -> Any:
    """One real tritonserver serving every example pipeline (streaming ones too), shared by the session."""
    return triton_server_factory(streaming_example_repository)


@pytest.fixture()
def copy_of(tmp_path: Path) -> Callable[[Path], Path]:
    """Copy a fixture directory into tmp_path so a test may change it."""

    def copy(src: Path) -> Path:
        dst = tmp_path / src.name
        shutil.copytree(src, dst)
        return dst

    return copy
