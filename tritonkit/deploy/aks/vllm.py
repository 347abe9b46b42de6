"""vLLM stages on AKS: NVIDIA's vLLM image, the repository at its serving root, engine metrics.

A repository holding ``backend: "vllm"`` models needs, beyond a plain Triton deployment:

- the ``nvcr.io/nvidia/tritonserver:<release>-vllm-python-py3`` image (the py3 image has no vllm
  backend): the release the stages were built for (``target:``, recorded in the manifest), else
  the default image's release;
- the repository at the serving root ``tritonkit build`` named the packed model directories by
  (``--serving-root``, default ``/models``; see tritonkit/kinds/paths.py): an as:// repository is
  copied there by an init container before Triton starts (Triton's own as:// download goes to a
  temporary directory, where ``model.json``'s absolute path would not hold); a pvc:// one is
  mounted there (subPath);
- GPUs for each engine (``tensor_parallel_size * pipeline_parallel_size``) and ``/dev/shm``
  (the deployment always mounts a Memory emptyDir there);
- where a stage sets ``REPORT_CUSTOM_METRICS``, NVIDIA's backend exports vLLM's own ``vllm:*``
  metrics through Triton's metrics port (src/utils/metrics.py: ``vllm:num_requests_waiting``,
  ``vllm:gpu_cache_usage_perc``, ... labelled ``model``/``version``): KEDA also scales on the
  requests waiting in the engines, and an alert watches the KV cache.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.deploy.checks import ngc_tag
from tritonkit.errors import RepositoryError
from tritonkit.kinds.paths import DEFAULT_SERVING_ROOT
from tritonkit.kinds.vllm.kind import VLLM
from tritonkit.kinds.vllm.spec import ENGINE_ARGS_FILE
from tritonkit.repository.manifest import Manifest
from tritonkit.repository.scan import scan_repository

__all__ = [
    "REPOSITORY_COPY_IMAGE",
    "VllmModels",
    "copy_init_container",
    "image_problems",
    "kv_cache_expr",
    "model_regex",
    "models_volume_size",
    "vllm_image_for",
    "find_vllm_models",
    "waiting_expr",
]

#: The init container that copies an as:// repository to the serving root: Microsoft's Azure CLI
#: image (``az storage blob download-batch``), pinned.
REPOSITORY_COPY_IMAGE = "mcr.microsoft.com/azure-cli:2.67.0"
#: vLLM's gauge of requests queued in the engine (NVIDIA's backend, REPORT_CUSTOM_METRICS)
WAITING_METRIC = "vllm:num_requests_waiting"
KV_CACHE_METRIC = "vllm:gpu_cache_usage_perc"


@dataclass(frozen=True)
class VllmModels:
    """What the deployment needs to know about the repository's vLLM stages."""

    models: tuple[str, ...]
    serving_root: str
    releases: tuple[str, ...]  # the targets recorded for them (may be empty)
    gpus: int  # the largest tensor_parallel_size * pipeline_parallel_size
    metrics: tuple[str, ...]  # stages exporting vllm:* metrics (REPORT_CUSTOM_METRICS)
    size_bytes: int  # the repository on disk: sizes the serving-root volume


def find_vllm_models(repository: Path) -> VllmModels | None:
    """The repository's vLLM stages (None when it has none)."""
    names = set(VLLM.models_in(repository))
    models = [m for m in scan_repository(repository) if m.name in names] if names else []
    if not models:
        return None
    try:
        manifest = Manifest.load(repository)
    except RepositoryError:  # unreadable: nothing recorded
        manifest = Manifest()
    roots = {manifest.serving_root_of(m.name) or DEFAULT_SERVING_ROOT for m in models}
    releases = sorted({r for m in models if (r := manifest.target_of(m.name)) is not None})
    gpus = 1
    metrics = []
    for m in models:
        for version in m.versions:
            gpus = max(gpus, _world_size(m.path / str(version) / ENGINE_ARGS_FILE))
        param = m.config.parameters.get("REPORT_CUSTOM_METRICS")
        if param is not None and param.string_value.lower() == "true":
            metrics.append(m.name)
    size = sum(p.stat().st_size for p in repository.rglob("*") if p.is_file() and not p.is_symlink())
    return VllmModels(
        models=tuple(m.name for m in models),
        serving_root=sorted(roots)[0] if len(roots) == 1 else ",".join(sorted(roots)),
        releases=tuple(releases),
        gpus=gpus,
        metrics=tuple(sorted(metrics)),
        size_bytes=size,
    )


def vllm_image_for(image: str, default_image: str, stages: VllmModels) -> str:
    """The image to run: the default py3 image becomes the vLLM image of the stages' release
    (else of the default's release); an explicit image is kept (image_problems judges it)."""
    if image != default_image:
        return image
    if len(stages.releases) == 1:
        return _image(stages.releases[0])
    tag = ngc_tag(default_image)
    return _image(tag[0] if tag else str(VLLM.serve.default_release))


def image_problems(image: str, gpu_count: int, stages: VllmModels) -> list[str]:
    """Why this deployment cannot run the vLLM stages (empty: it can)."""
    problems: list[str] = []
    names = ", ".join(stages.models)
    if "," in stages.serving_root:
        problems.append(
            f"the vLLM stages ({names}) were built for different serving roots ({stages.serving_root}); "
            "rebuild them with one --serving-root"
        )
    if len(stages.releases) > 1:
        problems.append(
            f"the vLLM stages ({names}) were built for different releases ({', '.join(stages.releases)}); "
            "one image serves them all: give them one target"
        )
    tag = ngc_tag(image)
    if tag is not None and tag != ngc_tag(_image(tag[0])):  # not NVIDIA's vLLM flavour
        problems.append(f"{image} has no vllm backend, which the stages {names} need: use {_image(tag[0])}")
    elif tag is not None and tag[0] not in VLLM.releases:
        problems.append(f"no vLLM image is known for release {tag[0]} ({image})")
    elif tag is not None and stages.releases and tag[0] not in stages.releases:
        problems.append(
            f"the vLLM stages {names} were built for release {stages.releases[0]}, whose vLLM may differ "
            f"from the one in {image}: rebuild with that target, or deploy {_image(stages.releases[0])}"
        )
    if gpu_count < stages.gpus:
        problems.append(
            f"a vLLM engine here spans {stages.gpus} GPU(s) (tensor_parallel_size x pipeline_parallel_size) "
            f"but each pod gets --gpu-count {gpu_count}: pass --gpu-count {stages.gpus} or more"
        )
    return problems


def models_volume_size(stages: VllmModels) -> str:
    """The serving-root emptyDir's size limit: the repository plus a quarter, at least 1 GiB."""
    return volume_size(stages.size_bytes)


def volume_size(size_bytes: int) -> str:
    """A volume's size limit for a repository of ``size_bytes``: plus a quarter, at least 1 GiB."""
    gib = max(1, -(-int(size_bytes * 1.25) // 2**30))
    return f"{gib}Gi"


def _image(release: str) -> str:
    """NVIDIA's vLLM image for ``release`` (the release catalog's, through the kind)."""
    return str(VLLM.serve.image_for(release))


def copy_init_container(
    *,
    triton_path: str,
    serving_root: str,
    env: list[dict[str, Any]],
    security: dict[str, Any],
    image: str,
    pull_policy: str = "Always",
    credentials: str | None = None,
) -> dict[str, Any]:
    """Copies ``as://ACCOUNT/CONTAINER[/PATH]`` into the serving root before Triton starts.

    The storage key is read from the Secret mounted at ``credentials`` (or workload identity
    signs in) and reaches ``az`` through the shell's environment, never the pod spec or the
    command line; blobs land in a hidden directory of the volume first and are renamed into
    place (one filesystem), which is then removed: Triton takes every sub-directory for a model.
    """
    account, _, rest = triton_path.removeprefix("as://").partition("/")
    container, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    script = "\n".join(
        [
            "set -eu",
            'if [ -n "${AZURE_FEDERATED_TOKEN_FILE:-}" ]; then',
            '  az login --service-principal -u "$AZURE_CLIENT_ID" -t "$AZURE_TENANT_ID" '
            '--federated-token "$(cat "$AZURE_FEDERATED_TOKEN_FILE")" --output none',
            "  AUTH=login",
            "else",
            "  AUTH=key",
            "fi",
            'if [ -n "${CREDENTIALS:-}" ]; then',
            '  AZURE_STORAGE_KEY="$(cat "$CREDENTIALS/AZURE_STORAGE_KEY")"; export AZURE_STORAGE_KEY',
            "fi",
            'rm -rf "$ROOT/.tritonkit-copy"',
            'az storage blob download-batch --auth-mode "$AUTH" --account-name "$ACCOUNT" '
            '--source "$CONTAINER" --pattern "${PREFIX:+$PREFIX/}*" --destination "$ROOT/.tritonkit-copy" '
            "--only-show-errors --output none",
            'SRC="$ROOT/.tritonkit-copy${PREFIX:+/$PREFIX}"',
            'for entry in "$SRC"/* "$SRC"/.tritonkit-manifest.json; do',
            '  [ -e "$entry" ] && mv "$entry" "$ROOT/"',
            "done",
            'rm -rf "$ROOT/.tritonkit-copy"',
        ]
    )
    values = {"ACCOUNT": account, "CONTAINER": container, "PREFIX": prefix, "ROOT": serving_root}
    mounts: list[dict[str, Any]] = [
        {"name": "model-repository", "mountPath": serving_root},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    if credentials is not None:
        values["CREDENTIALS"] = credentials
        mounts.append({"name": "storage-credentials", "mountPath": credentials, "readOnly": True})
    return {
        "name": "copy-model-repository",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["/bin/sh", "-c", script],
        "env": [
            *env,
            *({"name": k, "value": v} for k, v in values.items()),
            {"name": "AZURE_CONFIG_DIR", "value": "/tmp/.azure"},
        ],
        # requests = limits, like every container of the pod (Guaranteed QoS).
        "resources": {
            "requests": {"cpu": "500m", "memory": "2Gi"},
            "limits": {"cpu": "500m", "memory": "2Gi"},
        },
        "volumeMounts": mounts,
        "securityContext": dict(security),
    }


def waiting_expr(selector: str, models: tuple[str, ...]) -> str:
    """Requests waiting inside the vLLM engines, summed over the deployment's pods (a gauge)."""
    return f'sum({WAITING_METRIC}{{{selector},model=~"{_alternatives(models)}"}})'


def kv_cache_expr(selector: str, models: tuple[str, ...]) -> str:
    """The fullest KV cache among the engines (a gauge, 1 = full)."""
    return f'max({KV_CACHE_METRIC}{{{selector},model=~"{_alternatives(models)}"}})'


def model_regex(models: tuple[str, ...]) -> str:
    """A PromQL regex matching exactly these model names (for ``model=~"..."``)."""
    return _alternatives(models)


def _alternatives(models: tuple[str, ...]) -> str:
    """A PromQL regex matching exactly these model names ('.' escaped; inside a PromQL string
    literal a backslash is written twice)."""
    return "|".join(m.replace(".", "\\\\.") for m in models)


def _world_size(path: Path) -> int:
    try:
        engine = json.loads(path.read_text(encoding="utf-8"))
        return int(engine.get("tensor_parallel_size", 1)) * int(engine.get("pipeline_parallel_size", 1))
    except (OSError, ValueError, TypeError, AttributeError):
        return 1  # the validator reports an unreadable model.json
