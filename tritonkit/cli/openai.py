"""`tritonkit openai`: the OpenAI-compatible front before a Triton that already runs."""

from __future__ import annotations

from pathlib import Path

import typer

from tritonkit.cli import render
from tritonkit.cli._auth_options import split_pair, with_auth_options
from tritonkit.client.auth import AuthProvider
from tritonkit.errors import ConfigError
from tritonkit.openai_front import ApiKeys, ChatTemplate, FrontSettings, Limits, UrlAllowList

HELP = (
    "Serve an OpenAI-compatible API (/v1/chat/completions, /v1/completions, /v1/models) in front of "
    "a running Triton: its vLLM stages and the pipelines that declare an openai mapping."
)


def front_settings(
    triton_url: str,
    *,
    protocol: str,
    auth: AuthProvider | None,
    cacert: Path | None,
    api_key_file: Path | None,
    chat_templates: list[str],
    image_url_prefixes: list[str],
    repository: Path | None,
    models: list[str],
    max_body_bytes: int | None = None,
    request_timeout: float | None = None,
    default_max_tokens: int | None = None,
    tool_parsers: list[str] | None = None,
    stream_url: str | None = None,
    compose_pipelines: bool = True,
    stream_idle_timeouts: list[str] | None = None,
) -> FrontSettings:
    """The front's settings from the options `openai` and `serve --openai-port` share."""
    from tritonkit.openai_front.tool_parsers import PARSERS

    templates = {}
    for item in chat_templates:
        model, path = split_pair(item, "--chat-template")
        templates[model] = ChatTemplate.from_path(Path(path))
    parsers = {}
    for item in tool_parsers or []:
        model, parser = split_pair(item, "--tool-parser")
        if parser not in PARSERS:
            raise ConfigError(
                f"unknown tool parser '{parser}' for {model}", hint=f"use one of {', '.join(PARSERS)}"
            )
        parsers[model] = parser
    if stream_url is not None and not stream_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"--stream-url must be Triton's HTTP URL (http://host:8000), got '{stream_url}'",
            hint="Triton's generate_stream is an HTTP route; leave --stream-url out to stream over gRPC",
        )
    if protocol not in ("grpc", "http"):
        raise ConfigError(f"unknown protocol '{protocol}'", hint="use --protocol grpc or --protocol http")
    limits = Limits()
    idle, per_model = _idle_timeouts(stream_idle_timeouts or [])
    overrides = {
        "max_body_bytes": max_body_bytes,
        "request_timeout": request_timeout,
        "default_max_tokens": default_max_tokens,
        "stream_idle_timeout": idle,
        "stream_idle_timeouts": per_model or None,
    }
    given = {k: v for k, v in overrides.items() if v is not None}
    if given:
        limits = Limits(**{**limits.__dict__, **given})
    return FrontSettings(
        triton_url=triton_url,
        protocol=protocol,
        stream_url=stream_url,
        auth=auth,
        cacert=cacert,
        api_keys=ApiKeys.from_file(api_key_file) if api_key_file else None,
        limits=limits,
        image_urls=UrlAllowList(tuple(image_url_prefixes)),
        chat_templates=templates,
        tool_parsers=parsers,
        repository=repository,
        models=tuple(models),
        compose_pipelines=compose_pipelines,
    )


def _idle_timeouts(items: list[str]) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """``--stream-idle-timeout`` values: SECONDS (every model) or MODEL=SECONDS (repeatable)."""
    default: float | None = None
    per_model: list[tuple[str, float]] = []
    for item in items:
        model, _, text = item.rpartition("=")
        try:
            seconds = float(text)
        except ValueError:
            seconds = -1.0
        if not seconds > 0:
            raise ConfigError(
                f"--stream-idle-timeout takes SECONDS or MODEL=SECONDS (seconds > 0), got '{item}'",
                hint="e.g. --stream-idle-timeout 30 --stream-idle-timeout vlm_llm=90",
            )
        if model:
            per_model.append((model, seconds))
        else:
            default = seconds
    return default, tuple(per_model)


API_KEY_FILE_HELP = "File of API keys (one per line); callers must send 'Authorization: Bearer KEY'."
CHAT_TEMPLATE_HELP = "MODEL=PATH: a .jinja file, tokenizer_config.json or tokenizer dir (repeatable)."
TOOL_PARSER_HELP = (
    "MODEL=hermes|llama3_json: how tool_choice auto reads the model's tool calls (repeatable; "
    "default: the format its chat template shows)."
)
WORKERS_HELP = (
    "Front processes sharing the port, each with its own channel to Triton (auto: one per CPU this "
    "process may use). See docs/openai.md, sizing workers."
)
STREAM_URL_HELP = (
    "Triton's HTTP URL (http://host:8000): stream answers over its generate_stream, 30-45% less of "
    "the front's CPU per token than gRPC (default: over TRITON_URL; choices with an image always "
    "go over TRITON_URL). See docs/openai.md, sizing workers."
)
COMPOSE_HELP = (
    "Compose LLM-decoder pipelines (vlm_llm, arr_coc_llm) in the front: their prompt model, then "
    "their LLM stage's stream straight from Triton, so they stream as many answers at once as the "
    "engine (--no-compose-pipelines: their Python front door answers, one answer per instance). "
    "See docs/pipelines.md."
)
IDLE_HELP = (
    "SECONDS or MODEL=SECONDS (repeatable): end a stream that sends no piece for this long with a "
    "server-error event, cancel it in Triton and count it (tritonkit_openai_stalled_streams_total); "
    "default 60."
)
IMAGE_URL_HELP = "Fetch image_url http(s) URLs under this prefix (repeatable; default: data: URLs only)."


@with_auth_options
def command(
    triton_url: str = typer.Argument(..., help="Triton's URL (grpc://host:8001, http://host:8000 ...)."),
    port: int = typer.Option(9000, "--port", help="Port of the OpenAI API."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (0.0.0.0: the network)."),
    protocol: str = typer.Option("grpc", "--protocol", "-p", help="How to reach Triton: grpc or http."),
    stream_url: str | None = typer.Option(None, "--stream-url", help=STREAM_URL_HELP),
    api_key_file: Path | None = typer.Option(None, "--openai-api-key-file", help=API_KEY_FILE_HELP),
    chat_template: list[str] = typer.Option([], "--chat-template", help=CHAT_TEMPLATE_HELP),
    tool_parser: list[str] = typer.Option([], "--tool-parser", help=TOOL_PARSER_HELP),
    allow_image_url: list[str] = typer.Option([], "--allow-image-url", help=IMAGE_URL_HELP),
    repository: Path | None = typer.Option(
        None, "--repository", help="The served repository, to read the LLM stages' chat templates from."
    ),
    model: list[str] = typer.Option([], "--model", help="Serve only this model (repeatable)."),
    workers: str = typer.Option("1", "--workers", help=WORKERS_HELP),
    compose_pipelines: bool = typer.Option(
        True, "--compose-pipelines/--no-compose-pipelines", help=COMPOSE_HELP
    ),
    stream_idle_timeout: list[str] = typer.Option([], "--stream-idle-timeout", help=IDLE_HELP),
    max_body_bytes: int | None = typer.Option(None, "--max-body-bytes", help="Largest request body."),
    request_timeout: float | None = typer.Option(None, "--request-timeout", help="Seconds per request."),
    default_max_tokens: int | None = typer.Option(
        None, "--default-max-tokens", help="max_tokens for an LLM stage when a request gives none (256)."
    ),
    auth: AuthProvider | None = None,  # with_auth_options: from the credential options
    cacert: Path | None = None,
) -> None:
    from tritonkit.openai_front.server import parse_workers, serve

    count = parse_workers(workers)

    settings = front_settings(
        triton_url,
        protocol=protocol,
        auth=auth,
        cacert=cacert,
        api_key_file=api_key_file,
        chat_templates=chat_template,
        image_url_prefixes=allow_image_url,
        repository=repository,
        models=model,
        max_body_bytes=max_body_bytes,
        request_timeout=request_timeout,
        default_max_tokens=default_max_tokens,
        tool_parsers=tool_parser,
        stream_url=stream_url,
        compose_pipelines=compose_pipelines,
        stream_idle_timeouts=stream_idle_timeout,
    )
    keys = "API keys required" if api_key_file else "no API key (anyone who reaches the port may call)"
    procs = f", {count} workers" if count > 1 else ""
    streams = f", streams over {stream_url}" if stream_url else ""
    render.info(
        f"OpenAI API on http://{host}:{port}/v1 -> Triton {triton_url} ({protocol}{procs}{streams}); {keys}"
    )
    serve(settings, host=host, port=port, workers=count)
