"""`tritonkit openai` and `serve --openai-*` options, refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.cli.app import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 0), out.out, out.err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--openai-api-key-file", "{tmp}/missing.txt"], "cannot read the API key file"),
        (["--chat-template", "tiny_llm"], "--chat-template expects NAME=VALUE"),
        (["--chat-template", "tiny_llm={tmp}"], "holds no tokenizer_config.json"),
        (["--allow-image-url", "example.com"], "not an http(s) URL prefix"),
        (["--protocol", "ftp"], "unknown protocol 'ftp'"),
        (["--stream-url", "grpc://127.0.0.1:8001"], "--stream-url must be Triton's HTTP URL"),
    ],
)
def test_cli_openai_exits_1_with_a_clean_message_when_an_option_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], words: str
) -> None:
    argv = ["openai", "grpc://127.0.0.1:1", *[e.replace("{tmp}", str(tmp_path)) for e in extra]]
    code, out, err = run(argv, capsys)
    assert code == 1 and words in err and "Traceback" not in out + err


def test_cli_serve_refuses_an_empty_openai_key_file_before_starting_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("\n# none yet\n")
    code, out, err = run(
        ["serve", str(tmp_path), "--openai-port", "0", "--openai-api-key-file", str(keys)], capsys
    )
    assert code == 1 and "holds no key" in err and "starting tritonserver" not in out


def test_cli_help_lists_the_openai_command_and_serve_options(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["--help"], capsys)
    assert "openai" in out
    _, out, _ = run(["serve", "--help"], capsys)
    assert "--openai-port" in out and "--openai-api-key-file" in out


def test_front_settings_read_stream_idle_timeouts_for_every_model_and_per_model() -> None:
    from tritonkit.cli.openai import front_settings

    settings = front_settings(
        "grpc://127.0.0.1:8001", protocol="grpc", auth=None, cacert=None, api_key_file=None,
        chat_templates=[], image_url_prefixes=[], repository=None, models=[], request_timeout=100,
        stream_idle_timeouts=["30", "vlm_llm=90", "slow=500"],
    )  # fmt: skip
    limits = settings.limits
    assert limits.idle_timeout("tiny_llm") == 30 and limits.idle_timeout("vlm_llm") == 90
    assert limits.idle_timeout("slow") == 100  # never past the request timeout
    default = front_settings(
        "grpc://127.0.0.1:8001", protocol="grpc", auth=None, cacert=None, api_key_file=None,
        chat_templates=[], image_url_prefixes=[], repository=None, models=[],
    )  # fmt: skip
    assert default.limits.idle_timeout("any") == 60


@pytest.mark.parametrize("value", ["0", "-3", "m=", "m=soon", "abc"])
def test_front_settings_refuse_a_stream_idle_timeout_that_is_not_positive_seconds(value: str) -> None:
    from tritonkit.cli.openai import front_settings
    from tritonkit.errors import ConfigError

    with pytest.raises(ConfigError, match="--stream-idle-timeout takes SECONDS or MODEL=SECONDS"):
        front_settings(
            "grpc://127.0.0.1:8001", protocol="grpc", auth=None, cacert=None, api_key_file=None,
            chat_templates=[], image_url_prefixes=[], repository=None, models=[],
            stream_idle_timeouts=[value],
        )  # fmt: skip


@pytest.mark.parametrize("kind", ["stalled_streams", "cut_short_answers"])
def test_front_metrics_count_failed_streams_by_model_and_merge_them_across_workers(kind: str) -> None:
    from tritonkit.openai_front.metrics import FrontMetrics

    one, two = FrontMetrics(), FrontMetrics()
    count = {"stalled_streams": FrontMetrics.stalled, "cut_short_answers": FrontMetrics.cut_short}[kind]
    count(one, "vlm_llm")
    count(two, "vlm_llm")
    count(two, "tiny_llm")
    one.absorb(two.state())
    text = one.render()
    assert f'tritonkit_openai_{kind}_total{{model="vlm_llm"}} 2' in text
    assert f'tritonkit_openai_{kind}_total{{model="tiny_llm"}} 1' in text
    assert f"# TYPE tritonkit_openai_{kind}_total counter" in text
