"""Candidates on a live server through Triton's model-repository API: no restarts.

A candidate is loaded with a config override (``POST v2/repository/models/{name}/load`` with
``parameters.config`` = the config as JSON; the gRPC ``RepositoryModelLoad`` equivalent), then
its applied config is read back and compared with what was sent. Every candidate passes
tritonkit's static validator first. Restoring means loading the config the server had when the
run began (read back at the start), again as an override: a plain load without ``config``
is a no-op in Triton 2.51 when the files did not change, so it would leave the last candidate
in place.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonkit.client import control
from tritonkit.config import ModelConfig, config_to_dict, dumps_config, merge_json, new_config
from tritonkit.errors import (
    AuthenticationError,
    ConfigError,
    EndpointUnreachableError,
    TritonKitError,
    TuneError,
)
from tritonkit.repository.scan import version_dirs
from tritonkit.repository.validator import ConfigFile, Problem
from tritonkit.repository.validator.config_rules import check_config
from tritonkit.repository.validator.layout import check_layout

__all__ = ["CandidateRefusedError", "ModelControl", "config_from_json", "differences", "validate_candidate"]

logger = logging.getLogger(__name__)


class CandidateRefusedError(TuneError):
    """Triton (or the validator) refused a candidate; ``reason`` says why. The search records it
    as a result (a refused candidate is not a failure of the run) and goes on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def config_from_json(data: Mapping[str, Any], *, model: str) -> ModelConfig:
    """A ModelConfig from the server's JSON (HTTP ``config`` or gRPC ``as_json``)."""
    cfg = new_config()
    try:
        merge_json(cfg, dict(data.get("config", data)), where=f"config of model '{model}' from the server")
    except ConfigError as exc:
        raise TuneError(exc.message, hint=exc.hint) from exc
    return cfg


def validate_candidate(cfg: ModelConfig, *, model_dir: Path | None) -> list[Problem]:
    """The static validator's errors for a candidate config (warnings are not a reason to skip)."""
    problems: list[Problem] = []
    name = str(cfg.name)
    where = f"{model_dir or name}/<candidate>"
    cf = ConfigFile(
        model=name,
        path=(model_dir or Path(name)) / "config.pbtxt",
        display=where,
        text=dumps_config(cfg),
        config=cfg,
        sink=problems,
    )
    check_config(cf, dir_name=name)
    if model_dir is not None and model_dir.is_dir():
        check_layout(cf, model_dir=model_dir, display_dir=str(model_dir), versions=version_dirs(model_dir))
    return [p for p in problems if p.severity == "error"]


def _contains(sent: Any, got: Any) -> bool:
    """Whether everything in ``sent`` is in ``got`` (the server adds defaults and names)."""
    if isinstance(sent, dict):
        return isinstance(got, dict) and all(_contains(v, got.get(k)) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(got, list) and len(sent) == len(got) and all(map(_contains, sent, got))
    if got is None:
        return sent in (0, False, "", None)
    return bool(str(sent) == str(got))


def differences(sent: ModelConfig, applied: ModelConfig, fields: set[str]) -> list[str]:
    """Top-level ``fields`` whose applied value is not what was sent."""
    a, b = config_to_dict(sent), config_to_dict(applied)
    out = []
    for f in sorted(fields):
        if f in a and not _contains(a[f], b.get(f)):
            out.append(f"{f}: sent {json.dumps(a[f])}, server has {json.dumps(b.get(f))}")
        elif f not in a and f in b and b[f] not in ({}, [], 0, False):
            if f == "dynamic_batching":
                out.append(f"{f}: sent none, server has {json.dumps(b[f])}")
    return out


class ModelControl(control.ModelControl):
    """Loads configs into a running Triton through its model-repository API (HTTP or gRPC),
    and words the control client's failures for a tuning run."""

    def _call_error(self, exc: control.ControlCallError, action: str) -> TritonKitError:
        refusal = exc.refusal
        code, reason = refusal.code, refusal.reason
        if refusal.auth:
            return AuthenticationError(
                f"{action} was refused ({code}): {reason}",
                status=code,
                hint="the model-repository API may be restricted: pass --restricted-header "
                "HEADER=ENVVAR (and --key-env for a gateway)",
            )
        if refusal.connection or "connection" in reason.lower():
            return EndpointUnreachableError(f"{action}: cannot reach {self.endpoint}: {reason}")
        return TuneError(f"{action} failed ({code or 'error'}): {reason}")

    def config(self, model: str) -> ModelConfig:
        """The config the server applies to ``model`` now."""
        try:
            data = self.model_config(model)
        except control.ControlCallError as exc:
            reason = exc.refusal.reason
            if "unknown model" in reason.lower() or "not found" in reason.lower():
                raise TuneError(
                    f"model '{model}' is not loaded on {self.endpoint}: {reason}",
                    hint="check the model name (`tritonkit infer URL --list` shows the models)",
                ) from exc
            raise self._call_error(exc, f"reading the config of '{model}'") from exc
        return config_from_json(data, model=model)

    def _reason(self, model: str) -> str:
        """Triton's reason for a failed load, from the repository index (the load answer itself
        is often just 'failed to poll from model repository')."""
        try:
            entries = self.repository_index()
        except control.ControlCallError:  # the reason is a nicety; the load error still stands
            return ""
        for entry in entries:
            if entry.get("name") == model and entry.get("reason"):
                return str(entry["reason"])
        return ""

    def load(self, model: str, cfg: ModelConfig, *, files: Mapping[str, bytes] | None = None) -> None:
        """Load ``model`` with ``cfg`` as an override; CandidateRefusedError when Triton refuses.

        ``files`` (``{"file:<version>/<name>": bytes}``) override the model's files too (an engine
        stage's ``model.json``); Triton then loads from those files, not the repository's."""
        try:
            self.load_model(model, json.dumps(config_to_dict(cfg)), files=files)
        except control.ControlCallError as exc:
            reason = exc.refusal.reason
            lowered = reason.lower()
            if "not allowed" in lowered or ("explicit" in lowered and "mode" in lowered):
                raise TuneError(
                    f"{self.endpoint} does not allow loading models: {reason}",
                    hint="tuning needs a server started with --model-control-mode=explicit "
                    "(tritonkit tune REPO MODEL starts one for you)",
                ) from exc
            err = self._call_error(exc, f"loading '{model}'")
            if not isinstance(err, TuneError):
                raise err from exc
            extra = self._reason(model)
            raise CandidateRefusedError(
                f"{reason}{': ' + extra if extra and extra not in reason else ''}"
            ) from exc
