"""TensorRT-LLM rules: what the ``tensorrtllm`` backend and its Python models refuse at load time
or at the first request, found statically (no GPU needed).

Facts: tensorrtllm_backend docs/model_config.md (parameter tables), the backend's
model_state.cc / model_instance_state.cc (which parameters it requires, how it parses them, which
bad values it silently replaces with defaults), TensorRT-LLM's runtime gptJsonConfig.cpp (what it
reads from an engine's ``config.json``; engine files are ``rank<N>.engine``), and NVIDIA's
compatibility matrix for the TensorRT-LLM version of each ``-trtllm-python-py3`` release.

Per config (:func:`check_trtllm_config`, one of the validator's file checks):

- ``trtllm-parameter-missing`` (error): ``gpt_model_type`` absent (the backend throws), or neither
  ``gpt_model_path`` nor ``encoder_model_path``; ``tokenizer_dir`` absent on a tokenizer model.
- ``trtllm-parameter-unfilled`` (error for the mandatory ones, warning otherwise): a value still
  ``${...}`` from NVIDIA's template (fill_template.py not run for it).
- ``trtllm-parameter-unknown`` (warning): a name the backend does not read (a typo is silently
  ignored), with the closest known name.
- ``trtllm-parameter-value``: a value of the wrong kind (error when the model then fails to load,
  warning when the backend uses its default instead); ``worker_path`` (no longer supported: error).
- ``trtllm-engine``: ``gpt_model_path`` inside the repository without a readable ``config.json``
  or without a rank file per GPU (error); the engine's ``max_batch_size`` below Triton's
  (warning: the rest waits in TensorRT-LLM's queue); ``max_beam_width`` above the engine's (error).
- ``trtllm-gpus`` (error): a ``gpu_device_ids`` group whose GPU count is not the engine's
  tp_size * pp_size; (warning) more instances than device groups share GPUs.
- ``trtllm-tokenizer-missing`` (error): a tokenizer model's ``tokenizer_dir`` inside the
  repository that does not exist or holds no tokenizer files, or no ``tokenizer_dir`` at all on a
  Python model whose code reads it (NVIDIA's preprocessing/postprocessing: a KeyError at load).
- ``trtllm-datatype`` (warning): ``context_logits`` / ``generation_logits`` / ``draft_logits``
  not typed as the engine's logits (NVIDIA's ``${logits_datatype}``), or
  ``encoder_input_features`` not as the engine's dtype (``${encoder_input_features_data_type}``):
  the backend hands over the engine's tensors, so requests using them fail or read garbage.
  (An unfilled ``data_type: ${logits_datatype}`` itself is a ``config-parse`` error that names
  the template parameter: Triton cannot parse the config.)

Across the repository (:func:`check_trtllm_repository`):

- ``trtllm-stream-not-decoupled`` (warning): an entry point routes ``stream`` into a
  non-decoupled tensorrt_llm model: every request with stream=true fails.
- ``trtllm-bls-target-missing`` (warning): a BLS model's ``tensorrt_llm_model_name`` (etc.) names a
  model the repository does not have: Triton loads the BLS model (its calls run per request), and
  every request fails unless that model is loaded by then (as ``bls-model-unknown``).
- ``trtllm-version-mismatch`` (error): the engine was built by another TensorRT-LLM than the
  target release's image runs (engines are not portable across TensorRT-LLM releases).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path

from tritonkit.config import ModelConfig, data_type_name
from tritonkit.kinds.releases import same_trtllm_release, trtllm_release
from tritonkit.kinds.rules import ConfigFile, ImageRelease, ModelDirectory, RecordedTargets, selected_versions
from tritonkit.kinds.tensorrtllm.engine import EngineConfigError, EngineInfo, read_engine_config
from tritonkit.kinds.tensorrtllm.parameters import TRTLLM_PARAMETERS, parameter_problem
from tritonkit.kinds.tensorrtllm.spec import BACKEND, BLS_MODEL_PARAMETERS, mapped_local_path

__all__ = ["check_trtllm_config", "check_trtllm_repository", "is_trtllm", "uses_trtllm"]

_MANDATORY = ("gpt_model_type",)
#: files a Hugging Face tokenizer directory holds (one of them is enough)
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")


def is_trtllm(cfg: ModelConfig) -> bool:
    return bool(cfg.backend == BACKEND)


def uses_trtllm(configs: Mapping[str, ModelConfig]) -> list[str]:
    """The models of a repository served by the TensorRT-LLM backend."""
    return sorted(name for name, cfg in configs.items() if is_trtllm(cfg))


def _param(cfg: ModelConfig, key: str) -> str | None:
    return cfg.parameters[key].string_value if key in cfg.parameters else None


def check_trtllm_config(cf: ConfigFile, *, model_dir: Path, versions: tuple[int, ...] | list[int]) -> None:
    cfg = cf.config
    if is_trtllm(cfg):
        _parameters(cf)
        _engine(cf, model_dir)
    elif cfg.backend == "python" and "tokenizer_dir" in cfg.parameters:
        _tokenizer(cf, model_dir, versions)
    elif cfg.backend == "python" and _reads_tokenizer_dir(cfg, model_dir, versions):
        cf.error(
            "trtllm-tokenizer-missing",
            "the model's code reads parameter 'tokenizer_dir' (a TensorRT-LLM tokenizer model: "
            "NVIDIA's preprocessing/postprocessing) but the config does not set it: initialize() "
            'fails with a KeyError. Add parameters { key: "tokenizer_dir" value: { string_value: '
            '"<the Hugging Face tokenizer directory>" } } (fill_template.py tokenizer_dir:...)',
            at="parameters" if cfg.parameters else "backend",
        )


def _reads_tokenizer_dir(cfg: ModelConfig, model_dir: Path, versions: tuple[int, ...] | list[int]) -> bool:
    """Whether the Python file Triton loads names the parameter ``tokenizer_dir`` as a literal."""
    filename = cfg.default_model_filename or "model.py"
    for version in selected_versions(cfg, list(versions)):
        try:
            source = (model_dir / str(version) / filename).read_bytes()
        except OSError:
            continue
        if b'"tokenizer_dir"' in source or b"'tokenizer_dir'" in source:
            return True
    return False


#: tensors whose data type NVIDIA's templates leave to fill_template.py -> that template
#: parameter, which is also the EngineInfo property giving the engine's value
_TYPED = {
    "context_logits": "logits_datatype",
    "generation_logits": "logits_datatype",
    "draft_logits": "logits_datatype",
    "encoder_input_features": "encoder_input_features_data_type",
}


def _datatypes(cf: ConfigFile, engine: EngineInfo) -> None:
    """The template-typed tensors against what the engine produces and takes."""
    for field, tensors in (("input", cf.config.input), ("output", cf.config.output)):
        for i, tensor in enumerate(tensors):
            if tensor.name not in _TYPED:
                continue
            parameter = _TYPED[tensor.name]
            expected = str(getattr(engine, parameter))
            actual = data_type_name(tensor.data_type)
            if actual != expected:
                cf.warning(
                    "trtllm-datatype",
                    f"{field} '{tensor.name}' is TYPE_{actual} but the engine's is TYPE_{expected} "
                    f"({parameter} in NVIDIA's templates, from the engine's config.json): requests "
                    f"that use it fail or read the wrong bytes; set data_type: TYPE_{expected}",
                    at=f"{field}[{i}].data_type",
                )


def _parameters(cf: ConfigFile) -> None:
    cfg = cf.config
    for key in _MANDATORY:
        if key not in cfg.parameters:
            cf.error(
                "trtllm-parameter-missing",
                f"parameter '{key}' is required by the tensorrtllm backend (it throws without it); "
                "set it to inflight_fused_batching (or V1)",
                at="parameters",
            )
    if "gpt_model_path" not in cfg.parameters and "encoder_model_path" not in cfg.parameters:
        cf.error(
            "trtllm-parameter-missing",
            "parameter 'gpt_model_path' (NVIDIA's engine_dir) is missing: the backend fails with "
            "'Both encoder and decoder model paths are empty'",
            at="parameters",
        )
    for key in cfg.parameters:
        value = cfg.parameters[key].string_value
        at = f"parameters[{key}]"
        if key == "worker_path":
            cf.error(
                "trtllm-parameter-value",
                "'worker_path' is no longer supported and makes the backend throw; use executor_worker_path",
                at=at,
            )
            continue
        if key not in TRTLLM_PARAMETERS:
            close = difflib.get_close_matches(key, list(TRTLLM_PARAMETERS), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            cf.warning(
                "trtllm-parameter-unknown",
                f"parameter '{key}' is not one the tensorrtllm backend reads: Triton ignores it{hint}",
                at=at,
            )
            continue
        if value.startswith("${"):
            mandatory = key in _MANDATORY or key == "gpt_model_path"
            message = f"parameter '{key}' is still the template placeholder '{value}' " + (
                "(fill it: the model fails to load)"
                if mandatory
                else "(the backend ignores it and uses its default)"
            )
            if mandatory:
                cf.error("trtllm-parameter-unfilled", message, at=at)
            else:
                cf.warning("trtllm-parameter-unfilled", message, at=at)
            continue
        problem = parameter_problem(key, value)
        if problem is not None:
            severity, message = problem
            report = cf.error if severity == "error" else cf.warning
            report("trtllm-parameter-value", f"parameter '{key}': {message}", at=at)


def _engine(cf: ConfigFile, model_dir: Path) -> None:
    cfg = cf.config
    raw = _param(cfg, "gpt_model_path")
    if raw is None or raw.startswith("${"):
        return
    local = mapped_local_path(raw, model_dir)
    at = "parameters[gpt_model_path]"
    if local is None:
        cf.info(
            "trtllm-engine",
            f"gpt_model_path '{raw}' is outside the repository: the engine is not checked here",
            at=at,
        )
        return
    if not local.is_dir():
        if not Path(raw).is_absolute():  # the backend resolves it against its working directory
            cf.warning(
                "trtllm-engine",
                f"gpt_model_path '{raw}' is relative: the backend resolves it against tritonserver's "
                "working directory, not the model's; not found in the model directory either",
                at=at,
            )
            return
        cf.error("trtllm-engine", f"gpt_model_path '{raw}' is not a directory here ({local})", at=at)
        return
    try:
        engine = read_engine_config(local)
    except EngineConfigError as exc:
        cf.error("trtllm-engine", f"engine of gpt_model_path: {exc}", at=at)
        return
    _datatypes(cf, engine)
    missing = [f for f in engine.rank_files() if not (local / f).is_file()]
    if missing:
        cf.error(
            "trtllm-engine",
            f"the engine needs {engine.world_size} rank file(s) (tp_size {engine.tp_size} * pp_size "
            f"{engine.pp_size}); missing: {', '.join(missing)}",
            at=at,
        )
    if engine.max_batch_size is not None and cfg.max_batch_size > engine.max_batch_size:
        cf.warning(
            "trtllm-engine",
            f"max_batch_size {cfg.max_batch_size} is above the engine's {engine.max_batch_size} "
            "(trtllm-build --max_batch_size): the requests beyond it wait in TensorRT-LLM's queue",
            at="max_batch_size",
        )
    beams = _param(cfg, "max_beam_width")
    if beams is not None and beams.strip().isdigit() and engine.max_beam_width is not None:
        if int(beams) > engine.max_beam_width:
            cf.error(
                "trtllm-engine",
                f"max_beam_width {beams} is above the engine's {engine.max_beam_width}: the executor "
                "refuses to start",
                at="parameters[max_beam_width]",
            )
    _gpus(cf, engine)


def _gpus(cf: ConfigFile, engine: EngineInfo) -> None:
    cfg = cf.config
    ids = _param(cfg, "gpu_device_ids")
    instances = sum(g.count or 1 for g in cfg.instance_group) or 1
    if ids is None or ids.startswith("${") or not ids.strip():
        if instances > 1 and engine.world_size > 1:
            cf.warning(
                "trtllm-gpus",
                f"{instances} instances of a {engine.world_size}-GPU engine without gpu_device_ids: "
                "every instance takes the same visible GPUs",
                at="instance_group",
            )
        return
    groups = [g for g in ids.split(";") if g.strip()]
    for group in groups:
        try:
            count = len([int(x) for x in group.split(",")])
        except ValueError:
            return  # reported by trtllm-parameter-value
        if count != engine.world_size:
            cf.error(
                "trtllm-gpus",
                f"gpu_device_ids group '{group}' lists {count} GPU(s) but the engine needs "
                f"tp_size {engine.tp_size} * pp_size {engine.pp_size} = {engine.world_size}",
                at="parameters[gpu_device_ids]",
            )
            return
    if instances > len(groups):
        cf.warning(
            "trtllm-gpus",
            f"{instances} instances but {len(groups)} gpu_device_ids group(s) ('{ids}'): instances "
            "beyond the groups reuse them (instance i takes group i mod n) and share those GPUs",
            at="instance_group",
        )


def _tokenizer(cf: ConfigFile, model_dir: Path, versions: tuple[int, ...] | list[int]) -> None:
    raw = _param(cf.config, "tokenizer_dir") or ""
    at = "parameters[tokenizer_dir]"
    if raw.startswith("${") or not raw:
        cf.error("trtllm-tokenizer-missing", f"tokenizer_dir is not filled ('{raw}')", at=at)
        return
    if Path(raw).is_absolute():
        local = mapped_local_path(raw, model_dir)
        if local is None:
            cf.info(
                "trtllm-tokenizer-missing",
                f"tokenizer_dir '{raw}' is outside the repository: not checked",
                at=at,
            )
            return
    else:
        # tritonkit's models resolve a relative path in their version directory; NVIDIA's pass it
        # to from_pretrained, where it may also be a Hugging Face hub id (downloaded at load).
        candidates = [model_dir / str(v) / raw for v in versions] + [model_dir / raw]
        found = next((c for c in candidates if c.is_dir()), None)
        if found is None:
            hub_id = raw.count("/") == 1 and not raw.startswith(".")
            report = cf.info if hub_id else cf.warning
            report(
                "trtllm-tokenizer-missing",
                f"tokenizer_dir '{raw}' is not a directory of the model"
                + (" (a Hugging Face hub id? it is downloaded at load: not checked)" if hub_id else ""),
                at=at,
            )
            return
        local = found
    if not local.is_dir():
        cf.error("trtllm-tokenizer-missing", f"tokenizer_dir '{raw}' does not exist ({local})", at=at)
        return
    if not any((local / f).is_file() for f in _TOKENIZER_FILES):
        cf.error(
            "trtllm-tokenizer-missing",
            f"tokenizer_dir '{raw}' holds no tokenizer file (one of {', '.join(_TOKENIZER_FILES)}): "
            "AutoTokenizer.from_pretrained fails at load",
            at=at,
        )


# ----------------------------------------------------------------------------- repository-wide


def check_trtllm_repository(
    root: Path,
    infos: Mapping[str, ModelDirectory],
    *,
    explicit: ImageRelease | None,
    recorded: RecordedTargets | None,
) -> None:
    configs = {name: info.cf for name, info in infos.items() if info.cf is not None}
    for name, cf in configs.items():
        cfg = cf.config
        if cfg.platform == "ensemble":
            _stream_routes(cf, configs)
        elif cfg.backend == "python":
            _bls_targets(cf, configs)
        elif is_trtllm(cfg):
            _release(cf, root / name, explicit, recorded)


def _stream_routes(cf: ConfigFile, configs: Mapping[str, ConfigFile]) -> None:
    for i, step in enumerate(cf.config.ensemble_scheduling.step):
        member = configs.get(step.model_name)
        if member is None or not is_trtllm(member.config) or member.config.model_transaction_policy.decoupled:
            continue
        if "streaming" in step.input_map:
            cf.warning(
                "trtllm-stream-not-decoupled",
                f"input '{step.input_map['streaming']}' feeds 'streaming' of '{step.model_name}', which "
                "is not decoupled: every request with it true fails (decoupled_mode must be true to stream)",
                at=f"ensemble_scheduling.step[{i}].input_map[streaming]",
            )


def _bls_targets(cf: ConfigFile, configs: Mapping[str, ConfigFile]) -> None:
    params = cf.config.parameters
    named = [k for k in BLS_MODEL_PARAMETERS if k in params]
    if not named and cf.model != "tensorrt_llm_bls":
        return
    targets = {k: params[k].string_value for k in named}
    if cf.model == "tensorrt_llm_bls" and "tensorrt_llm_model_name" not in targets:
        targets["tensorrt_llm_model_name"] = "tensorrt_llm"  # NVIDIA's BLS default
    for key, model in targets.items():
        if not model or model.startswith("${") or model in configs:
            continue
        cf.warning(
            "trtllm-bls-target-missing",
            f"{key} names model '{model}', which this repository does not have: Triton loads "
            f"'{cf.model}' (the BLS calls run per request), and every request fails unless "
            f"'{model}' is loaded by then",
            at=f"parameters[{key}]" if key in params else "name",
        )


def _release(
    cf: ConfigFile, model_dir: Path, explicit: ImageRelease | None, recorded: RecordedTargets | None
) -> None:
    release = _target_release(cf.model, explicit, recorded)
    raw = _param(cf.config, "gpt_model_path")
    if release is None or raw is None:
        return
    row = trtllm_release(release)
    local = mapped_local_path(raw, model_dir)
    if row is None or local is None:
        return
    try:
        engine = read_engine_config(local)
    except EngineConfigError:
        return  # reported per config
    if engine.version is None:
        return
    same = same_trtllm_release(engine.version, row.trtllm)
    if same is False:
        cf.error(
            "trtllm-version-mismatch",
            f"the engine was built by TensorRT-LLM {engine.version} but tritonserver {release}'s "
            f"-trtllm-python-py3 image runs {row.trtllm}: TensorRT-LLM engines load only on the "
            "release that built them",
            at="parameters[gpt_model_path]",
        )


def _target_release(
    model: str, explicit: ImageRelease | None, recorded: RecordedTargets | None
) -> str | None:
    if explicit is not None:
        return explicit.release
    if recorded is None:
        return None
    own = recorded.target_of(model)
    if own is not None:
        return own
    spec = recorded.owner(model)
    if spec is None:
        return None
    # The engine model records no target of its own: its stage's Python models do.
    releases = {recorded.target_of(m) for m in recorded.models_of(spec)} - {None}
    return releases.pop() if len(releases) == 1 else None
