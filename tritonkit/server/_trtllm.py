"""Where a TensorRT-LLM model can be served, said before a server start that could only fail.

The ``tensorrtllm`` backend needs an NVIDIA GPU and NVIDIA's ``-trtllm-python-py3`` image: the
pip-installed tritonserver that ``tritonkit serve`` runs has no such backend, and TensorRT-LLM
does not run on a CPU. So a repository with such a model is refused up front, with the places it
can run, instead of a model-load failure after a long start.
"""

from __future__ import annotations

from pathlib import Path

from tritonkit.errors import ServerError, TritonKitError
from tritonkit.kinds.tensorrtllm.kind import TENSORRTLLM, trtllm_models
from tritonkit.repository.manifest import Manifest

__all__ = ["refuse_unservable_trtllm", "trtllm_models"]


def refuse_unservable_trtllm(repository: Path, *, gpu: bool, image: str | None) -> None:
    """ServerError when ``repository`` has a TensorRT-LLM model this server cannot load.

    ``image`` None: the local (pip-installed) tritonserver; else the Docker engine's image.
    """
    models = TENSORRTLLM.models_in(repository)
    if not models:
        return
    serve = TENSORRTLLM.serve
    release = _release(repository, models) or serve.default_release
    wanted = serve.image.format(release=release) if serve.image and release else TENSORRTLLM.name
    names = ", ".join(f"'{m}'" for m in models)
    where = (
        f"run it on a GPU node: `tritonkit deploy --target aks` (image {wanted} on a GPU node pool), "
        f"or on a machine with an NVIDIA GPU and Docker: `tritonkit serve --engine docker --image {wanted}`; "
        "`tritonkit validate` checks the layout statically here"
    )
    if not gpu:
        raise ServerError(
            f"model(s) {names} use the TensorRT-LLM backend, which runs only on an NVIDIA GPU; "
            "this machine has none",
            hint=where,
        )
    if image is None:
        raise ServerError(
            f"model(s) {names} use the TensorRT-LLM backend, which the pip-installed tritonserver "
            "does not have",
            hint=where,
        )
    if serve.image_marker and serve.image_marker not in image:
        raise ServerError(
            f"model(s) {names} use the TensorRT-LLM backend, which image {image} does not have",
            hint=f"use --image {wanted}",
        )


def _release(repository: Path, models: list[str]) -> str | None:
    """The release ``tritonkit build`` recorded for a sibling of ``models`` (None: none recorded)."""
    try:
        manifest = Manifest.load(repository)
    except TritonKitError:
        return None
    for model in models:
        spec = manifest.owner(model)
        if spec is None:
            continue
        for sibling in manifest.models_of(spec):
            release = manifest.target_of(sibling)
            if release:
                return release
    return None
