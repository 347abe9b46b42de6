"""LocalTritonServer's command line, environment, ports and config-name choice (no server started)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritonkit.cli.app import app
from tritonkit.errors import RepositoryError, ServerError
from tritonkit.server import (
    LocalTritonServer,
    _vllm,
    find_installation,
    gpu_present,
    resolve_model_config_name,
)
from tritonkit.server._local import free_port

pytest.importorskip("pytriton")


def built_command(server: LocalTritonServer, backend_dir: Path) -> list[str]:
    server._choose_ports()
    return server.command(backend_dir, find_installation())


def test_command_binds_localhost_with_distinct_free_ports_when_none_are_given(tmp_path: Path) -> None:
    server = LocalTritonServer(tmp_path, model_config_name=None)
    args = built_command(server, tmp_path / "backends")
    assert args[0].endswith("/tritonserver")
    assert f"--model-repository={tmp_path.resolve()}" in args
    assert f"--backend-directory={tmp_path / 'backends'}" in args
    for flag in ("--http-address", "--grpc-address", "--metrics-address"):
        assert f"{flag}=127.0.0.1" in args
    assert len({server.http_port, server.grpc_port, server.metrics_port}) == 3
    assert server.http_url == f"http://127.0.0.1:{server.http_port}"
    assert server.grpc_url == f"grpc://127.0.0.1:{server.grpc_port}"
    assert server.grpc_address == f"127.0.0.1:{server.grpc_port}"
    assert server.metrics_url == f"http://127.0.0.1:{server.metrics_port}/metrics"
    assert "--exit-on-error=false" in args
    assert not any(a.startswith("--model-config-name") for a in args)


def test_command_passes_flags_through_when_they_are_given(tmp_path: Path) -> None:
    server = LocalTritonServer(
        tmp_path,
        http_port=18000,
        grpc_port=18001,
        metrics_port=18002,
        model_config_name="h100",
        http_restricted_api=["model-repository:admin-key=abc"],
        grpc_restricted_protocol="health:k=v",
        strict_readiness=False,
        exit_timeout_secs=3,
        extra_args=["--log-verbose=1", "--model-load-thread-count=2"],
    )
    args = built_command(server, tmp_path)
    for expected in (
        "--http-port=18000",
        "--grpc-port=18001",
        "--metrics-port=18002",
        "--model-config-name=h100",
        "--http-restricted-api=model-repository:admin-key=abc",
        "--grpc-restricted-protocol=health:k=v",
        "--strict-readiness=false",
        "--exit-timeout-secs=3",
        "--model-load-thread-count=2",
    ):
        assert expected in args
    assert args[-2:] == ["--log-verbose=1", "--model-load-thread-count=2"]  # extra args last: they win


def test_addresses_use_loopback_when_the_server_binds_every_interface(tmp_path: Path) -> None:
    server = LocalTritonServer(tmp_path, host="0.0.0.0")
    args = built_command(server, tmp_path)
    assert "--http-address=0.0.0.0" in args
    assert server.http_address.startswith("127.0.0.1:")


def test_environment_puts_pytriton_libs_and_this_python_first_when_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/other")
    install = find_installation()
    env = LocalTritonServer(tmp_path, env={"EXTRA": "1"}).environment(install)
    # Then the running Python's own libpython (the stub must load it, not the system's).
    python_libs = _vllm.python_library_dirs(None)
    assert env["LD_LIBRARY_PATH"].split(":") == [str(install.libs), *python_libs, "/opt/other"]
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert env["EXTRA"] == "1"


def test_resolve_model_config_name_follows_the_gpu_when_auto() -> None:
    expected = None if gpu_present() else "cpu"
    assert resolve_model_config_name("auto") == expected
    assert resolve_model_config_name("h100") == "h100"
    assert resolve_model_config_name("") is None
    assert resolve_model_config_name(None) is None


def test_gpu_present_is_false_when_cuda_visible_devices_hides_every_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_present() is False
    assert resolve_model_config_name("auto") == "cpu"


def test_addresses_raise_server_error_when_the_server_never_started(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="call start"):
        _ = LocalTritonServer(tmp_path).http_url


def test_start_raises_repository_error_when_the_repository_is_missing(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="not found"):
        LocalTritonServer(tmp_path / "nope").start()


def test_start_refuses_at_once_when_a_chosen_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = LocalTritonServer(tmp_path, http_port=port)
        with pytest.raises(ServerError, match=f"http port {port} on 127.0.0.1 is already in use"):
            server.start()
    assert not server.running


def test_free_port_returns_a_bindable_port_when_asked() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_repr_never_shows_restricted_api_secrets_when_they_are_configured(tmp_path: Path) -> None:
    server = LocalTritonServer(tmp_path, http_restricted_api=["health:admin-key=TOPSECRET"])
    assert "TOPSECRET" not in repr(server)


def test_serve_cli_lists_its_flags_when_asked_for_help() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for flag in ("--http-port", "--grpc-port", "--metrics-port", "--model-config-name",
                 "--http-restricted-api", "--grpc-restricted-protocol", "--server-arg", "--engine"):
        assert flag in result.output


def test_serve_cli_rejects_an_unknown_engine_when_given_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", str(tmp_path), "--engine", "podman"])
    assert result.exit_code != 0
    assert "unknown engine 'podman'" in str(result.exception)


@pytest.mark.parametrize(
    ("extra", "on_demand"),
    [
        ((), False),
        (("--model-control-mode=explicit", "--load-model=a"), True),
        (("--model-control-mode", "explicit"), True),
        (("--model-control-mode=poll",), False),
    ],
)
def test_loads_on_demand_only_when_model_control_mode_is_explicit(
    tmp_path: Path, extra: tuple[str, ...], on_demand: bool
) -> None:
    # models an explicit-mode server has not loaded yet are not refused models
    server = LocalTritonServer(tmp_path, model_config_name=None, extra_args=extra)
    assert server._loads_on_demand() is on_demand
