"""TensorRT-LLM stages on AKS: NVIDIA's -trtllm-python-py3 image, GPUs per engine, engine metrics.

A repository holding ``backend: "tensorrtllm"`` models needs, beyond a plain Triton deployment:

- the ``nvcr.io/nvidia/tritonserver:<release>-trtllm-python-py3`` image (the py3 image has no
  tensorrtllm backend): the release the stage was built for (recorded in the manifest), else
  the default image's release; an explicit image without the backend is refused;
- as many GPUs per pod as the largest engine's tp_size * pp_size (its ranks), and ``/dev/shm``
  (the deployment always mounts a Memory emptyDir there; multi-GPU engines talk through it);
- the repository where the configs' absolute paths point (``gpt_model_path``,
  ``tokenizer_dir`` under the stage's ``serving_root``, default ``/models``): the same
  placement as vLLM stages (aks.render: an as:// repository is copied there by an init
  container, a pvc:// one mounted there with its sub-path);
- the backend's own metrics, exported through Triton's metrics port
  (inflight_batcher_llm/src/custom_metrics_reporter: ``nv_trt_llm_request_metrics`` with
  ``request_type`` active/max/scheduled/context/waiting and ``nv_trt_llm_kv_cache_block_metrics``
  with ``kv_cache_block_type`` max/free/used/tokens_per, labelled ``model``/``version``): KEDA
  also scales on the requests waiting in the engines, and an alert watches the KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonkit.config import read_config
from tritonkit.deploy.aks.vllm import VllmModels, volume_size
from tritonkit.deploy.checks import ngc_tag
from tritonkit.errors import TritonKitError
from tritonkit.kinds.paths import serving_root_of
from tritonkit.kinds.tensorrtllm.engine import EngineConfigError, read_engine_config
from tritonkit.kinds.tensorrtllm.kind import TENSORRTLLM
from tritonkit.kinds.tensorrtllm.spec import mapped_local_path
from tritonkit.kinds.walk import config_files_of
from tritonkit.repository.manifest import Manifest

__all__ = [
    "KV_CACHE_ALERT_FRACTION",
    "REQUEST_METRIC",
    "KV_CACHE_METRIC",
    "TrtllmModels",
    "WAITING_TARGET",
    "deploy_problems",
    "image_for",
    "models_volume_size",
    "kv_cache_expr",
    "find_trtllm_models",
    "waiting_expr",
]

REQUEST_METRIC = "nv_trt_llm_request_metrics"
KV_CACHE_METRIC = "nv_trt_llm_kv_cache_block_metrics"
#: KEDA adds a replica when more requests than this wait in each replica's engines on average.
WAITING_TARGET = 4
#: The alert fires when an engine's KV cache stays fuller than this (requests are paused or queued).
KV_CACHE_ALERT_FRACTION = 0.95


@dataclass(frozen=True)
class TrtllmModels:
    """What the deployment needs to know about the repository's TensorRT-LLM models."""

    models: tuple[str, ...]
    release: str | None  # recorded by `tritonkit build` (None: not recorded)
    gpus: int  # the largest engine's tp_size * pp_size (1 when no engine is readable here)
    serving_roots: tuple[str, ...]  # where the configs' absolute paths expect the repository
    size_bytes: int = 0  # the repository on disk: sizes the serving-root volume of an as:// copy


def find_trtllm_models(repository: Path) -> TrtllmModels | None:
    """The repository's TensorRT-LLM models, or None when it has none."""
    models: list[str] = []
    gpus = 1
    roots: set[str] = set()
    for model, (config, *_variants) in config_files_of(repository, TENSORRTLLM.backends).items():
        try:
            cfg = read_config(config)
        except (OSError, TritonKitError):
            continue  # validate_for_deploy reports it
        models.append(model)
        path = cfg.parameters["gpt_model_path"].string_value if "gpt_model_path" in cfg.parameters else ""
        root = serving_root_of(path, model=model)
        if root is not None:
            roots.add(root)
        local = mapped_local_path(path, config.parent)
        if local is not None:
            try:
                gpus = max(gpus, read_engine_config(local).world_size)
            except EngineConfigError:
                pass  # the validator reports it
    if not models:
        return None
    return TrtllmModels(
        models=tuple(models),
        release=_recorded_release(repository, models),
        gpus=gpus,
        serving_roots=tuple(sorted(roots)),
    )


def _recorded_release(repository: Path, models: list[str]) -> str | None:
    try:
        manifest = Manifest.load(repository)
    except TritonKitError:
        return None
    return next((r for m in models if (r := manifest.sibling_release(m)) is not None), None)


def image_for(stages: TrtllmModels, image: str, *, default_image: str) -> tuple[str, str | None]:
    """The image to run and, when tritonkit chose it, a note saying so.

    The default (py3) image is swapped for the -trtllm-python-py3 image of the stage's release
    (else of the default image's release); an explicit image is kept (deploy_problems judges it).
    """
    if image != default_image:
        return image, None
    tag = ngc_tag(image)
    release = stages.release or (tag[0] if tag else None)
    if release is None or release not in TENSORRTLLM.releases:
        return image, None
    chosen = _image(release)
    return (
        chosen,
        f"TensorRT-LLM models {', '.join(stages.models)}: image {chosen} "
        "(the py3 image has no tensorrtllm backend)",
    )


def deploy_problems(
    stages: TrtllmModels, *, image: str, gpu_count: int, vllm: VllmModels | None = None
) -> list[str]:
    """What would keep the TensorRT-LLM models from loading in the rendered deployment."""
    out: list[str] = []
    names = ", ".join(stages.models)
    tag = ngc_tag(image)
    if tag is not None and str(TENSORRTLLM.serve.image_marker) not in tag[1]:
        out.append(
            f"TensorRT-LLM models {names}: image {image} has no tensorrtllm backend; use "
            f"{_image(stages.release or tag[0])}"
        )
    elif tag is not None and stages.release is not None and tag[0] != stages.release:
        out.append(
            f"TensorRT-LLM models {names} were built for {stages.release} (its TensorRT-LLM engines load "
            f"only there) but the image is {image}"
        )
    if gpu_count < stages.gpus:
        out.append(
            f"TensorRT-LLM models {names}: the largest engine has {stages.gpus} ranks (tp_size * pp_size) "
            f"but the pods get {gpu_count} GPU(s); pass --gpus {stages.gpus}"
        )
    roots = set(stages.serving_roots) | ({vllm.serving_root} if vllm is not None else set())
    if len(roots) > 1:
        out.append(
            f"the LLM stages name their files under different serving roots ({', '.join(sorted(roots))}): "
            "the repository is mounted at one; rebuild them with the same serving_root"
        )
    return out


def models_volume_size(stages: TrtllmModels) -> str:
    """The serving-root emptyDir's size limit (as:// copies): the repository plus a quarter, >= 1 GiB."""
    return volume_size(stages.size_bytes)


def _image(release: str) -> str:
    """NVIDIA's TensorRT-LLM image for ``release`` (the release catalog's, through the kind)."""
    return str(TENSORRTLLM.serve.image_for(release))


def waiting_expr(selector: str) -> str:
    """Requests waiting inside the TensorRT-LLM engines of the deployment (all pods)."""
    return f'sum({REQUEST_METRIC}{{{selector},request_type="waiting"}})'


def kv_cache_expr(selector: str) -> str:
    """The fullest engine's KV-cache use (used blocks / max blocks, per pod and model)."""
    by = "namespace, pod, model"
    used = f'sum by ({by}) ({KV_CACHE_METRIC}{{{selector},kv_cache_block_type="used"}})'
    most = f'sum by ({by}) ({KV_CACHE_METRIC}{{{selector},kv_cache_block_type="max"}})'
    return f"max({used} / clamp_min({most}, 1))"
