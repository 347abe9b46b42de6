"""The optional Docker engine: its container command line (no Docker engine needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tritonkit.server.docker import DEFAULT_IMAGE, DockerTritonServer


def test_docker_command_serves_the_mounted_repository_when_built(tmp_path: Path) -> None:
    server = DockerTritonServer(
        tmp_path,
        model_config_name="cpu",
        http_restricted_api=["model-repository:admin-key=abc"],
        extra_args=["--log-verbose=1"],
        gpus=False,
    )
    args = server.command()
    assert args[:2] == ["tritonserver", "--model-repository=/models"]
    assert "--model-config-name=cpu" in args
    assert "--exit-on-error=false" in args
    assert "--http-restricted-api=model-repository:admin-key=abc" in args
    assert args[-1] == "--log-verbose=1"
    assert server.image == DEFAULT_IMAGE
    assert not server.running


def test_docker_and_local_servers_keep_the_same_serving_options_alike(tmp_path: Path) -> None:
    """One declaration of the serving options (server/_base.py ServingOptions) for both launchers:
    a spec given as one string is one spec for both (Docker split it into characters), and both
    refuse a keyword neither takes."""
    from tritonkit.server import LocalTritonServer

    options: dict[str, Any] = dict(
        http_port=8100,
        model_config_name="cpu",
        http_restricted_api="model-repository:admin-key=abc",
        grpc_restricted_protocol=["health:probe-key=xyz"],
    )
    docker = DockerTritonServer(tmp_path, gpus=False, **options)
    local = LocalTritonServer(tmp_path, **options)
    for server in (docker, local):
        assert server._serving_flags() == [
            "--model-config-name=cpu",
            "--http-restricted-api=model-repository:admin-key=abc",
            "--grpc-restricted-protocol=health:probe-key=xyz",
        ]
        assert server._requested_ports == {"http": 8100, "grpc": None, "metrics": None}
        assert sorted(server._secrets) == ["abc", "xyz"]
        assert dict(server._probe_headers) == {"admin-key": "abc"}
    for launcher in (DockerTritonServer, LocalTritonServer):
        with pytest.raises(TypeError, match="http_prot"):
            launcher(tmp_path, http_prot=8000)  # type: ignore[call-arg]
