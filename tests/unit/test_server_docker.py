"""The optional Docker engine: its container command line (no Docker engine needed)."""

from __future__ import annotations

from pathlib import Path

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
