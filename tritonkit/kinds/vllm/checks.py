"""Rules for ``backend: "vllm"`` models: what NVIDIA's vLLM backend finds only at load or first request.

Facts from triton-inference-server/vllm_backend ``src/model.py`` (read through the source index,
2026-11): ``auto_complete_config`` adds the backend's inputs and outputs a config lacks, sets the
decoupled transaction policy and ``max_batch_size`` 0 (raising, so failing the load, when the
config batches) -- Triton runs it unless started with ``--disable-auto-complete-config``, so
NVIDIA's tutorials (llama2vllm, the speculative-decoding models, the backend's own sample) name
only the backend; ``initialize`` asserts the decoupled transaction policy and reads the
``text_output`` output config, reads ``model.json`` from the
version directory and passes it as is to ``AsyncEngineArgs(**...)`` (so an unknown key is a
``TypeError`` at load and a relative ``model`` path is resolved against the server's working
directory); ``_validate_device_config`` refuses KIND_GPU when ``tensor_parallel_size *
pipeline_parallel_size`` > 1 (KIND_GPU pins one device), pins KIND_GPU instances to their device,
leaves KIND_MODEL to the engine, and does nothing for any other kind (so KIND_CPU does not keep
vLLM off a GPU); ``_setup_lora`` reads ``multi_lora.json`` (LoRA name -> adapter directory) only
when ``enable_lora`` is true (bool or the string "true"), and fails the load when it is missing.

The engine arguments each vLLM version accepts come from ``engine_args.engine_arg_names``;
the target's vLLM version from its ``-vllm-python-py3`` image (``kinds.releases.VLLM_RELEASES``).
Without a known version only names no recorded version knows are flagged, as warnings.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonkit.config import config_to_dict, merge_json
from tritonkit.kinds.paths import local_path
from tritonkit.kinds.releases import VLLM_RELEASES
from tritonkit.kinds.rules import ConfigFile, FileContext, Problem, Severity, selected_versions
from tritonkit.kinds.vllm.engine_args import engine_arg_names
from tritonkit.kinds.vllm.spec import (
    BACKEND,
    ENGINE_ARGS_FILE,
    MULTI_LORA_FILE,
    STRUCTURED_OUTPUTS_PARAMETER,
    TOKENIZER_FILES,
    has_tokenizer,
)

__all__ = ["check_vllm", "complete_vllm", "is_vllm", "world_size"]

_PLACEHOLDER = re.compile(r"\$\{[^}\n]*\}")
_SERVER_KINDS = {"KIND_MODEL", "KIND_GPU", "KIND_CPU"}


#: the tensors the backend's auto_complete_config adds when a config lacks them (name, data type,
#: dims, optional), as src/model.py ``_auto_complete_inputs_and_outputs`` lists them; tritonkit's
#: local backend (triton_side/backends/vllm) adds the same
AUTO_INPUTS: tuple[tuple[str, str, tuple[int, ...], bool], ...] = (
    ("text_input", "TYPE_STRING", (1,), False),
    ("stream", "TYPE_BOOL", (1,), True),
    ("sampling_parameters", "TYPE_STRING", (1,), True),
    ("exclude_input_in_output", "TYPE_BOOL", (1,), True),
    ("return_finish_reason", "TYPE_BOOL", (1,), True),
    ("return_cumulative_logprob", "TYPE_BOOL", (1,), True),
    ("return_logprobs", "TYPE_BOOL", (1,), True),
    ("return_num_input_tokens", "TYPE_BOOL", (1,), True),
    ("return_num_output_tokens", "TYPE_BOOL", (1,), True),
)
AUTO_OUTPUTS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("text_output", "TYPE_STRING", (-1,)),
    ("finish_reason", "TYPE_STRING", (-1,)),
    ("cumulative_logprob", "TYPE_FP32", (-1,)),
    ("logprobs", "TYPE_STRING", (-1,)),
    ("num_input_tokens", "TYPE_UINT32", (1,)),
    ("num_output_tokens", "TYPE_UINT32", (-1,)),
)


def is_vllm(cf: ConfigFile) -> bool:
    return bool(cf.config.backend == BACKEND)


def world_size(engine: Mapping[str, Any]) -> int | None:
    """tensor_parallel_size * pipeline_parallel_size as the backend computes it (None: not numbers)."""
    try:
        return int(engine.get("tensor_parallel_size", 1)) * int(engine.get("pipeline_parallel_size", 1))
    except (TypeError, ValueError):
        return None


def complete_vllm(cf: ConfigFile, context: FileContext) -> None:
    """What the backend's auto_complete_config makes of ``cf`` before Triton checks it: the
    decoupled policy, ``max_batch_size`` 0 (a config that batches makes it raise: an error) and
    the tensors the config lacks. The vLLM kind's auto-complete."""
    if not is_vllm(cf):
        return
    config = cf.config
    if config.HasField("model_transaction_policy") and not config.model_transaction_policy.decoupled:
        # the Python backend's set_model_transaction_policy raises when the config's block (even
        # an empty one) says otherwise: Triton's QA case model_transaction_policy_mismatch
        cf.error(
            "auto-complete-conflict",
            "model_transaction_policy says decoupled false (a block without the field reads false), "
            "but NVIDIA's vLLM backend calls set_model_transaction_policy(decoupled=True) in its "
            "auto_complete_config: the Python backend raises and Triton fails the load. Set "
            "decoupled: true or remove the block",
            at="model_transaction_policy",
        )
    config.model_transaction_policy.decoupled = True
    if config.max_batch_size > 0:
        cf.error(
            "auto-complete-conflict",
            f"max_batch_size {config.max_batch_size}: NVIDIA's vLLM backend sets max_batch_size 0 in "
            "its auto_complete_config (the engine batches itself) and raises ValueError for a "
            "config that batches, so Triton fails the load. Set max_batch_size: 0 or leave it out",
            at="max_batch_size",
        )
    # protobuf JSON replaces a repeated field: give each list whole, the config's tensors first
    present = config_to_dict(config)
    inputs = list(present.get("input", []))
    outputs = list(present.get("output", []))
    have_inputs = {t["name"] for t in inputs}
    have_outputs = {t["name"] for t in outputs}
    inputs += [
        {"name": n, "data_type": d, "dims": list(dims), "optional": o}
        for n, d, dims, o in AUTO_INPUTS
        if n not in have_inputs
    ]
    outputs += [
        {"name": n, "data_type": d, "dims": list(dims)}
        for n, d, dims in AUTO_OUTPUTS
        if n not in have_outputs
    ]
    added = {"input": inputs, "output": outputs}
    merge_json(config, added, where=f"{cf.display}: the vLLM backend's auto-complete")


def check_vllm(
    cf: ConfigFile,
    *,
    model_dir: Path,
    display_dir: str,
    versions: Sequence[int],
    release: str | None,
    files: bool = True,
) -> None:
    """Every rule on one config of a vLLM model; ``files``: also the version dirs' JSON files
    (False for a configs/*.pbtxt variant, whose version dirs the main config already judged)."""
    if not is_vllm(cf):
        return
    _placeholders_in_config(cf)
    # with auto-complete on (Triton's default), complete_vllm has set both already
    if not cf.config.model_transaction_policy.decoupled:
        cf.error(
            "vllm-not-decoupled",
            "with auto-complete off (--disable-auto-complete-config), NVIDIA's vLLM backend asserts a "
            "decoupled model at load; set model_transaction_policy { decoupled: true }",
            at="model_transaction_policy" if cf.config.HasField("model_transaction_policy") else "backend",
        )
    if "text_output" not in {t.name for t in cf.config.output}:
        cf.error(
            "vllm-output-missing",
            "with auto-complete off (--disable-auto-complete-config), the config must declare the "
            "backend's tensors: its initialize() reads the config of output 'text_output' and fails "
            'the load without it; declare output { name: "text_output" data_type: TYPE_STRING '
            "dims: [ -1 ] } (and input text_input)",
            at="backend",
        )
    engines: list[dict[str, Any]] = []
    for v in selected_versions(cf.config, versions):
        engine = _read_engine(cf, model_dir, display_dir, v, report=files)
        if engine is None:
            continue
        engines.append(engine)
        if files:
            _engine_keys(cf, engine, display_dir, v, model_dir, release)
            _model_path(cf, engine, model_dir, display_dir, v)
            _lora(cf, engine, model_dir, display_dir, v)
    _instance_kinds(cf, engines)
    _structured_outputs_parameter(cf, release)


# -------------------------------------------------------------------------- config rules


#: the fields of vLLM's StructuredOutputsConfig (vLLM 0.32, vllm/config/structured_outputs.py)
_STRUCTURED_CONFIG_KEYS = frozenset(
    {"backend", "disable_any_whitespace", "disable_additional_properties", "reasoning_parser",
     "reasoning_parser_plugin", "enable_in_reasoning"}
)  # fmt: skip
#: the first vLLM whose SamplingParams takes ``structured_outputs`` (0.6-0.10 named it
#: ``guided_decoding``; 0.4-0.5 had none)
_STRUCTURED_OUTPUTS_VLLM = (0, 11)


def _structured_outputs_parameter(cf: ConfigFile, release: str | None) -> None:
    """The config parameter STRUCTURED_OUTPUTS_CONFIG, which tritonkit's local backend hands the
    engine as ``structured_outputs_config`` (NVIDIA's backend ignores it): a JSON object of that
    config's fields, and a warning when the target release's vLLM takes no structured outputs."""
    param = cf.config.parameters.get(STRUCTURED_OUTPUTS_PARAMETER) if cf.config.parameters else None
    if param is None:
        return
    at = "parameters"
    try:
        value = json.loads(param.string_value)
    except json.JSONDecodeError as exc:
        value = exc
    if not isinstance(value, dict):
        cf.error(
            "vllm-structured-outputs-config",
            f"parameter {STRUCTURED_OUTPUTS_PARAMETER} must be a JSON object (vLLM's "
            f"structured_outputs_config), got {param.string_value!r}: the local backend refuses the load",
            at=at,
        )
        return
    unknown = sorted(set(value) - _STRUCTURED_CONFIG_KEYS)
    if unknown:
        cf.error(
            "vllm-structured-outputs-config",
            f"parameter {STRUCTURED_OUTPUTS_PARAMETER}: unknown key(s) {', '.join(unknown)}; vLLM's "
            f"structured_outputs_config takes {', '.join(sorted(_STRUCTURED_CONFIG_KEYS))}",
            at=at,
        )
    if value.get("disable_any_whitespace") and value.get("backend", "auto") not in ("xgrammar", "guidance"):
        cf.error(
            "vllm-structured-outputs-config",
            f"parameter {STRUCTURED_OUTPUTS_PARAMETER}: disable_any_whitespace needs backend "
            "xgrammar or guidance (vLLM refuses it at load otherwise)",
            at=at,
        )
    row = VLLM_RELEASES.get(release) if release else None
    if row is not None and row.vllm_tuple < _STRUCTURED_OUTPUTS_VLLM:
        cf.warning(
            "vllm-structured-outputs-release",
            f"release {release}'s image ships vLLM {row.vllm}, whose SamplingParams takes no "
            "structured_outputs: on NVIDIA's vllm backend there this stage cannot honour a JSON "
            "response_format (tritonkit's local backend can; see docs/openai.md)",
            at=at,
        )


def _placeholders_in_config(cf: ConfigFile) -> None:
    for i, text in enumerate(cf.text.splitlines(), start=1):
        stripped = text.lstrip()
        if stripped.startswith("#"):
            continue
        for match in _PLACEHOLDER.finditer(text):
            _report(
                cf, "error", "vllm-placeholder", cf.display, i,
                f"unfilled placeholder {match.group(0)}: the backend reads it literally",
            )  # fmt: skip


def _instance_kinds(cf: ConfigFile, engines: list[dict[str, Any]]) -> None:
    sizes = [s for s in (world_size(e) for e in engines) if s is not None]
    multi = max(sizes, default=1) > 1
    groups = cf.config.instance_group
    kinds = [
        (f"instance_group[{i}].kind", cf.config.instance_group[i].Kind.Name(g.kind))
        for i, g in enumerate(groups)
    ]
    if not kinds:
        kinds = [("backend", "KIND_AUTO")]  # no instance_group: Triton picks GPU or CPU per node
    for at, kind in kinds:
        if kind == "KIND_GPU" and multi:
            cf.error(
                "vllm-multi-gpu-kind-gpu",
                f"tensor_parallel_size * pipeline_parallel_size = {max(sizes)} with KIND_GPU: the backend "
                "refuses it (KIND_GPU pins one GPU per instance); use KIND_MODEL for multi-GPU engines",
                at=at,
            )
        elif kind not in _SERVER_KINDS:
            word = "no instance_group" if at == "backend" else kind
            if multi:
                cf.error(
                    "vllm-instance-kind",
                    f"{word}: Triton resolves it to KIND_GPU on a GPU node, where the backend refuses "
                    f"a {max(sizes)}-GPU engine; use KIND_MODEL",
                    at=at,
                )
            else:
                cf.info(
                    "vllm-instance-kind",
                    f"{word}: Triton resolves it to KIND_GPU on a GPU node (the backend pins one GPU) and "
                    "KIND_CPU elsewhere; NVIDIA's samples use KIND_MODEL, which leaves the devices to vLLM",
                    at=at,
                )
        elif kind == "KIND_CPU":
            cf.info(
                "vllm-kind-cpu",
                "KIND_CPU does not keep vLLM off a GPU: NVIDIA's backend leaves the device to vLLM, which "
                "uses the GPU of the -vllm-python-py3 image (tritonkit serve runs its CPU build locally)",
                at=at,
            )


# -------------------------------------------------------------------------- model.json


def _read_engine(
    cf: ConfigFile, model_dir: Path, display_dir: str, version: int, *, report: bool
) -> dict[str, Any] | None:
    path = model_dir / str(version) / ENGINE_ARGS_FILE
    display = f"{display_dir}/{version}/{ENGINE_ARGS_FILE}"
    if not path.is_file():
        if report:
            cf.error(
                "vllm-model-json-missing",
                f"{display} is missing: the vLLM backend reads its engine arguments from it at load",
                at="backend",
            )
        return None
    data, problem = _load_json(cf, path, display, "vllm-model-json-invalid")
    if problem is not None:
        if report:
            cf.add(problem)
        return None
    if not isinstance(data, dict):
        if report:
            _report(
                cf, "error", "vllm-model-json-invalid", display, 1,
                f"{ENGINE_ARGS_FILE} must be a JSON object of engine arguments, "
                f"got {type(data).__name__}",
            )  # fmt: skip
        return None
    if report:
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in _PLACEHOLDER.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            _report(
                cf, "error", "vllm-placeholder", display, line,
                f"unfilled placeholder {match.group(0)}: vLLM would receive it literally",
            )  # fmt: skip
    return data


def _engine_keys(
    cf: ConfigFile,
    engine: Mapping[str, Any],
    display_dir: str,
    version: int,
    model_dir: Path,
    release: str | None,
) -> None:
    display = f"{display_dir}/{version}/{ENGINE_ARGS_FILE}"
    text = (model_dir / str(version) / ENGINE_ARGS_FILE).read_text(encoding="utf-8", errors="replace")
    known = engine_arg_names()
    row = VLLM_RELEASES.get(release) if release else None
    names = known.get(row.vllm) if row is not None else None
    if names is None:
        why = (
            f"release {release}'s image ships vLLM {row.vllm}, whose engine arguments tritonkit has not "
            "recorded" if row is not None
            else f"no release with a vLLM image is known for this model ({release})" if release
            else "no target release is known for this model (pass --target, or set target: in the spec)"
        )  # fmt: skip
        _report(
            cf, "info", "vllm-version-unknown", display, None,
            f"{why}: only names no recorded vLLM version ({_span(known)}) knows are flagged",
        )  # fmt: skip
    union = frozenset().union(*(k.names for k in known.values()))
    for key in engine:
        line = _key_line(text, key)
        if names is not None:
            if key in names.names:
                continue
            others = _ranges([key in k.names for k in known.values()], list(known))
            where = f"; vLLM {others} know(s) it" if others else ""
            _report(
                cf, "error", "vllm-engine-arg-unknown", display, line,
                f"engine argument '{key}' is not one vLLM {names.vllm} (release {release}) accepts: "
                f"AsyncEngineArgs refuses it at load{where}{_did_you_mean(key, names.names)}",
            )  # fmt: skip
        elif key not in union:
            _report(
                cf, "warning", "vllm-engine-arg-unknown", display, line,
                f"engine argument '{key}' is not one any recorded vLLM version ({_span(known)}) "
                f"accepts{_did_you_mean(key, union)}",
            )  # fmt: skip


def _model_path(
    cf: ConfigFile, engine: Mapping[str, Any], model_dir: Path, display_dir: str, version: int
) -> None:
    display = f"{display_dir}/{version}/{ENGINE_ARGS_FILE}"
    text = (model_dir / str(version) / ENGINE_ARGS_FILE).read_text(encoding="utf-8", errors="replace")
    value = engine.get("model")
    line = _key_line(text, "model")
    if value is None:
        _report(cf, "error", "vllm-model-missing", display, None, "model.json names no 'model'")
        return
    if not isinstance(value, str) or not value:
        _report(cf, "error", "vllm-model-missing", display, line, f"'model' must be a string, got {value!r}")
        return
    if not value.startswith("/"):
        local = model_dir / str(version) / value
        if value.startswith(".") or local.is_dir():
            _report(
                cf, "error", "vllm-model-path-relative", display, line,
                f"'model' is the relative path {value!r}: the backend passes it to vLLM as is, which "
                "resolves it against the server's working directory, not the model directory; write "
                f"the absolute path where the repository is served (e.g. /models/{cf.model}/{version}/"
                f"{value.lstrip('./')})",
            )  # fmt: skip
        return  # a hub id
    local_dir = local_path(value, model_dir=model_dir)
    if local_dir is None:
        _outside(cf, display, line, f"'model' {value}")
        return
    shown = f"{value} (here {local_dir})"
    if not local_dir.is_dir():
        _report(
            cf,
            "error",
            "vllm-model-dir-missing",
            display,
            line,
            f"model directory {shown} does not exist",
        )
        return
    if not (local_dir / "config.json").is_file():
        _report(
            cf, "error", "vllm-model-dir-incomplete", display, line,
            f"model directory {shown} has no config.json: it is not a Hugging Face model directory",
        )  # fmt: skip
    skip = str(engine.get("skip_tokenizer_init", "")).lower() == "true"
    if not has_tokenizer(local_dir) and not engine.get("tokenizer") and not skip:
        _report(
            cf, "error", "vllm-model-dir-incomplete", display, line,
            f"model directory {shown} has no tokenizer ({', '.join(TOKENIZER_FILES[:3])}, ...) and "
            "model.json sets neither 'tokenizer' nor 'skip_tokenizer_init'",
        )  # fmt: skip


def _lora(cf: ConfigFile, engine: Mapping[str, Any], model_dir: Path, display_dir: str, version: int) -> None:
    display = f"{display_dir}/{version}/{MULTI_LORA_FILE}"
    path = model_dir / str(version) / MULTI_LORA_FILE
    enabled = "enable_lora" in engine and str(engine["enable_lora"]).lower() == "true"
    if not path.is_file():
        if enabled:
            text = (model_dir / str(version) / ENGINE_ARGS_FILE).read_text(encoding="utf-8", errors="replace")
            _report(
                cf, "error", "vllm-lora-file-missing", f"{display_dir}/{version}/{ENGINE_ARGS_FILE}",
                _key_line(text, "enable_lora"),
                f"enable_lora is on but {display} is missing: the backend fails the load without it",
            )  # fmt: skip
        return
    if not enabled:
        _report(
            cf, "warning", "vllm-lora-disabled", display, None,
            "multi_lora.json is ignored because model.json does not set enable_lora: true; a request "
            "naming one of its LoRAs gets 'LoRA feature is not enabled'",
        )  # fmt: skip
        return
    data, problem = _load_json(cf, path, display, "vllm-lora-invalid")
    if problem is not None:
        cf.add(problem)
        return
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        _report(
            cf, "error", "vllm-lora-invalid", display, 1,
            "multi_lora.json must map LoRA names to adapter directories (strings)",
        )  # fmt: skip
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    for name, where in data.items():
        line = _key_line(text, name)
        if not where.startswith("/"):
            local: Path | None = model_dir / str(version) / where
            if not local.is_dir():  # type: ignore[union-attr]
                continue  # may be a hub id for vLLM versions that download adapters
        else:
            local = local_path(where, model_dir=model_dir)
        if local is None:
            _outside(cf, display, line, f"LoRA '{name}' at {where}")
        elif not local.is_dir():
            _report(
                cf, "error", "vllm-lora-missing", display, line,
                f"LoRA '{name}': adapter directory {where} (here {local}) does not exist",
            )  # fmt: skip


# -------------------------------------------------------------------------- helpers


def _load_json(cf: ConfigFile, path: Path, display: str, code: str) -> tuple[Any, Problem | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None, _problem(cf, "error", code, display, None, "not UTF-8 text")
    except OSError as exc:
        return None, _problem(cf, "error", code, display, None, f"cannot read: {exc.strerror}")
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, _problem(
            cf, "error", code, display, exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno})"
        )


def _key_line(text: str, key: str) -> int | None:
    match = re.search(r'"' + re.escape(key) + r'"\s*:', text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _did_you_mean(key: str, names: frozenset[str]) -> str:
    close = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _ranges(flags: list[bool], versions: list[str]) -> str:
    """The versions whose flag is set, consecutive ones as 'first to last'."""
    runs: list[str] = []
    start: int | None = None
    for i, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            runs.append(versions[start] if i - 1 == start else f"{versions[start]} to {versions[i - 1]}")
            start = None
    return ", ".join(runs)


def _span(known: Mapping[str, Any]) -> str:
    versions = list(known)
    return f"{versions[0]} to {versions[-1]}" if versions else "none"


def _problem(
    cf: ConfigFile, severity: Severity, code: str, file: str, line: int | None, message: str
) -> Problem:
    return Problem(severity=severity, model=cf.model, file=file, line=line, code=code, message=message)


def _report(cf: ConfigFile, severity: Severity, code: str, file: str, line: int | None, message: str) -> None:
    """Report a problem found in ``file`` (one of the model's files, not its config) on ``cf``."""
    cf.add(_problem(cf, severity, code, file, line, message))


def _outside(cf: ConfigFile, display: str, line: int | None, what: str) -> None:
    """Say that ``what`` (a path model.json or multi_lora.json names) is not in the repository."""
    message = f"{what} lies outside this repository; tritonkit cannot check it"
    _report(cf, "info", "vllm-model-outside", display, line, message)
