"""The engine's arguments: ``model.json``, ``multi_lora.json`` and the config parameter
``STRUCTURED_OUTPUTS_CONFIG``, with served paths mapped onto this machine.

Shipped beside ``model.py`` (the stub puts this directory on ``sys.path``); imports nothing
from tritonkit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils

ENGINE_ARGS_FILE = "model.json"
#: config parameter: the engine's structured_outputs_config when model.json has none
STRUCTURED_OUTPUTS_PARAMETER = "STRUCTURED_OUTPUTS_CONFIG"
LORA_FILE = "multi_lora.json"


def map_local_path(value: str, *, model_name: str, version_dir: Path) -> tuple[str, bool]:
    """``value``, or where it lies in this model's directory when it is a missing absolute path.

    ``<anything>/<model name>/<N>/<rest>`` -> ``<model dir>/<N>/<rest>`` for the first such pair,
    ``N`` any version number: tritonkit's served-path rule (``tritonkit.kinds.paths.local_path``),
    copied because this file runs inside Triton; a unit test holds the two to the same table.
    Returns the path and whether it was mapped (only onto a path that exists). Relative paths
    and hub ids are returned unchanged.
    """
    path = Path(value)
    if not path.is_absolute() or path.exists():
        return value, False
    parts = path.parts
    for i in range(len(parts) - 1):
        if parts[i] == model_name and parts[i + 1].isdigit():
            local = version_dir.parent.joinpath(*parts[i + 1 :])
            return (str(local), True) if local.exists() else (value, False)
    return value, False


class EngineFiles:
    """One model's engine arguments, read from its version directory and its config.

    Refusals raise Triton's TritonModelException naming the model and the file: the model does
    not load. ``log`` takes a line for Triton's log (a path mapped onto this machine).
    """

    def __init__(
        self, *, model_name: str, version_dir: Path, config: dict[str, Any], log: Callable[[str], None]
    ) -> None:
        self.model_name = model_name
        self.version_dir = version_dir
        self.config = config
        self._log = log

    def engine_arguments(self) -> dict[str, Any]:
        """``model.json``, its model and tokenizer paths mapped, and STRUCTURED_OUTPUTS_CONFIG."""
        path = self.version_dir / ENGINE_ARGS_FILE
        if not path.is_file():
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': '{ENGINE_ARGS_FILE}' with the vLLM engine arguments "
                f"must be in {self.version_dir}"
            )
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': cannot read {path}: {exc}"
            ) from exc
        if not isinstance(config, dict):
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': {path} must hold a JSON object of engine arguments"
            )
        for key in ("model", "tokenizer"):
            value = config.get(key)
            if isinstance(value, str):
                config[key] = self._local_path(value, key)
        structured = self._structured_outputs_parameter()
        if structured is not None and "structured_outputs_config" not in config:
            config["structured_outputs_config"] = structured
        return config

    def _structured_outputs_parameter(self) -> dict[str, Any] | None:
        """The config parameter ``STRUCTURED_OUTPUTS_CONFIG`` (a JSON object), the engine's
        ``structured_outputs_config`` where ``model.json`` has none: a target release whose vLLM
        predates that engine argument refuses it in ``model.json``, and NVIDIA's backend ignores
        config parameters it does not know."""
        raw = self.config.get("parameters", {}).get(STRUCTURED_OUTPUTS_PARAMETER, {}).get("string_value")
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            value = exc
        if not isinstance(value, dict):
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': parameter {STRUCTURED_OUTPUTS_PARAMETER} must be a JSON "
                f"object (vLLM's structured_outputs_config), got {raw!r}"
            )
        return value

    def _local_path(self, value: str, what: str) -> str:
        mapped, changed = map_local_path(value, model_name=self.model_name, version_dir=self.version_dir)
        if changed:
            self._log(f"model '{self.model_name}': {what} {value} is not on this machine; using {mapped}")
        return mapped

    def loras(self, engine_config: dict[str, Any]) -> dict[str, str] | None:
        """The LoRA adapters of ``multi_lora.json`` by name (None unless enable_lora is true)."""
        if str(engine_config.get("enable_lora", "false")).lower() != "true":
            return None
        path = self.version_dir / LORA_FILE
        try:
            loras = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': enable_lora is true but {path} is missing"
            ) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': cannot read {path}: {exc}"
            ) from exc
        if not isinstance(loras, dict) or not all(isinstance(v, str) for v in loras.values()):
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': {path} must map LoRA names to adapter directories"
            )
        resolved = {}
        for name, where in loras.items():
            local = where if Path(where).is_absolute() else str(self.version_dir / where)
            resolved[name] = self._local_path(local, f"LoRA '{name}'")
        return resolved
