"""Reading what tritonserver says: load failures, port clashes, secrets kept out of messages."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

# Triton 2.51 logs e.g.
#   E1121 21:03:04.123 123 model_lifecycle.cc:654] "failed to load 'broken' version 1: Invalid argument: ..."
# (older releases print the same text without the quotes).
_LOAD_FAILURE = re.compile(r"failed to load '(?P<model>[^']+)' version (?P<version>-?\d+): (?P<reason>.*)$")
_POLL_FAILURE = re.compile(r"Poll failed for model directory '(?P<model>[^']+)': (?P<reason>.*)$")
# Failures found while Triton resolves the repository, before any model loads: these models never
# reach the index as UNAVAILABLE, so the log is the only place that names them, e.g.
#   "failed to load model 'nover': at least one version must be available under the version policy ..."
#   "Invalid argument: ensemble ens contains models that are not available or ambiguous: missing_model"
_RESOLVE_FAILURE = re.compile(r"failed to load model '(?P<model>[^']+)': (?P<reason>.*)$")
# Every ensemble check of Triton core names the ensemble the same few ways, e.g.
#   "Invalid argument: ensemble 'ens' depends on 'm' whose required version 0 is not loaded."
#   "Invalid argument: ensemble ens allows maximum batch size 8, but it contains model m ..."
#   "Invalid argument: in ensemble ens, ensemble tensor IN: inconsistent shape: ..."
# (only error lines: an info line may mention an ensemble in passing).
_ENSEMBLE_FAILURE = re.compile(
    r"^E\d{4} .*?\] \"?(?P<reason>(?:[A-Z][A-Za-z ]*: )?(?:in )?ensemble "
    r"'?(?P<model>[^\s',]+)'?[, ].*)$"
)
_FAILURE_PATTERNS = (_LOAD_FAILURE, _POLL_FAILURE, _RESOLVE_FAILURE, _ENSEMBLE_FAILURE)
# e.g. "failed to start GRPC service: Unavailable - Socket '127.0.0.1:60021' already in use"
_ADDRESS_IN_USE = re.compile(
    r"failed to start (?P<service>\w+) service: (?P<reason>.*already in use.*?)\s*\"?$"
)

#: flags whose values carry credentials (``<apis>:<header>=<secret>``)
SECRET_FLAGS = ("--http-restricted-api", "--grpc-restricted-protocol")


def clean_reason(text: str) -> str:
    """Triton's reason on one line: the message, plus the innermost user frame of a traceback."""
    text = text.strip()
    if text.endswith('"'):
        text = text[:-1]
    text = text.replace('\\"', '"').replace("\\n", "\n")
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and "<frozen importlib" not in line]
    if not lines:
        return "no reason given"
    message, rest = lines[0], [line for line in lines[1:] if line != "At:"]
    if "TritonModelException" in message and "At:" in lines:
        return message  # raised on purpose by a backend: its message is the whole story
    if rest and "At:" in lines:
        return f"{message} (at {rest[0]})"
    return " ".join([message, *rest])


def parse_load_failures(log: str) -> dict[str, str]:
    """Model name -> Triton's reason, for every "failed to load" (or poll failure) in ``log``."""
    failures: dict[str, str] = {}
    for line in log.splitlines():
        match = next((m for m in (p.search(line) for p in _FAILURE_PATTERNS) if m), None)
        if match and match.group("model") not in failures:
            failures[match.group("model")] = clean_reason(match.group("reason"))
    return failures


def merge_failures(from_log: Mapping[str, str], from_index: Mapping[str, str]) -> dict[str, str]:
    """Log failures first (in log order: they carry the full reason, and directories Triton could
    not even read appear only there), then index entries the log did not explain."""
    merged = dict(from_log)
    for model, reason in from_index.items():
        merged.setdefault(model, reason)
    return merged


def failures_from_index(
    index: Iterable[Mapping[str, object]], *, unloaded_is_failure: bool = False
) -> dict[str, str]:
    """Model name -> reason for every UNAVAILABLE entry of ``/v2/repository/index``.

    With ``unloaded_is_failure`` (a server that loads every model at start-up), a model listed
    with no state at all counts too: Triton lists ensembles it refused before loading that way.
    """
    entries = list(index)
    failures: dict[str, str] = {}
    for entry in entries:
        if str(entry.get("state", "")).upper() == "UNAVAILABLE":
            name = str(entry.get("name", "?"))
            raw = str(entry.get("reason") or "")
            reason = clean_reason(raw) if raw else "unavailable (no reason given; see the server log)"
            failures.setdefault(name, reason)
    if unloaded_is_failure:
        stated = {str(e.get("name", "?")) for e in entries if e.get("state")}
        for entry in entries:
            name = str(entry.get("name", "?"))
            if name not in stated:
                failures.setdefault(name, "not loaded (Triton gave no state; see the server log)")
    return failures


def address_in_use(log: str) -> str | None:
    """"GRPC: Socket '...' already in use" when a service could not bind its port, else None."""
    for line in log.splitlines():
        match = _ADDRESS_IN_USE.search(line)
        if match:
            return f"{match.group('service')}: {match.group('reason').strip()}"
    return None


def redact_args(args: Sequence[str]) -> list[str]:
    """The command line with the credential part of restricted-API flags replaced by ***."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(_redact_spec(arg))
            hide_next = False
            continue
        flag, eq, value = arg.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                out.append(f"{flag}={_redact_spec(value)}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out


def _redact_spec(spec: str) -> str:
    apis, colon, header = spec.partition(":")
    if not colon:
        return "***"
    key, _, _ = header.partition("=")
    return f"{apis}:{key}=***"


def restricted_headers(specs: Iterable[str]) -> dict[str, str]:
    """Header name -> value from restricted-API specs, so the launcher's own probes pass them."""
    headers: dict[str, str] = {}
    for spec in specs:
        _, _, header = spec.partition(":")
        key, eq, value = header.partition("=")
        if eq and key:
            headers[key] = value
    return headers


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value replaced by ***."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def log_tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


#: what tritonkit's onnxruntime backend writes once per model (instance group) at load: the
#: execution provider that actually runs and why (see backends/onnxruntime/model.py)
ONNX_PROVIDER_MARKER = "[tritonkit onnxruntime]"


def backend_message(line: str, markers: Sequence[str]) -> str | None:
    """The text after the first of ``markers`` in a server log line (a backend's own note), else None."""
    for marker in markers:
        at = line.find(marker)
        if at >= 0:
            return line[at + len(marker) :].strip().strip('"').replace('\\"', '"')
    return None


def execution_providers(log: str) -> dict[str, str]:
    """Model name -> the onnxruntime backend's line on the execution provider it runs on."""
    found: dict[str, str] = {}
    for line in log.splitlines():
        message = backend_message(line, (ONNX_PROVIDER_MARKER,))
        if message:
            model, _, _ = message.partition(":")
            found.setdefault(model.strip(), message)
    return found
