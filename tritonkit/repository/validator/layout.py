"""Rules about the files on disk: version directories, model files, label files, symlinks."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tritonkit.config import ModelConfig
from tritonkit.repository.validator._report import ConfigFile, Problem

__all__ = ["AUTO_FILES", "check_layout", "check_symlinks", "expected_model_file", "selected_versions"]

#: files from which Triton can infer a backend (and often auto-complete a missing config)
AUTO_FILES = (
    "model.onnx",
    "model.plan",
    "model.savedmodel",
    "model.graphdef",
    "model.pt",
    "model.py",
    "model.xml",
)
_AUTOCOMPLETE_FILES = ("model.onnx", "model.plan", "model.savedmodel", "model.pt")
_PLATFORM_FILES = {
    "tensorrt_plan": "model.plan",
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
    "onnxruntime_onnx": "model.onnx",
    "pytorch_libtorch": "model.pt",
}
_BACKEND_FILES = {
    "onnxruntime": "model.onnx",
    "python": "model.py",
    "tensorrt": "model.plan",
    "pytorch": "model.pt",
    "openvino": "model.xml",
    "tensorflow": "model.savedmodel",
}


def expected_model_file(cfg: ModelConfig) -> str | None:
    """The file Triton loads from each version directory (None: ensemble or unknown backend)."""
    if cfg.platform == "ensemble":
        return None
    if cfg.default_model_filename:
        return str(cfg.default_model_filename)
    return _PLATFORM_FILES.get(cfg.platform) or _BACKEND_FILES.get(cfg.backend)


def selected_versions(cfg: ModelConfig, versions: Sequence[int]) -> list[int]:
    """The versions Triton would load under the config's version policy (default: latest 1)."""
    policy = cfg.version_policy
    if policy.HasField("all"):
        return list(versions)
    if policy.HasField("specific"):
        return [v for v in policy.specific.versions if v in versions]
    n = policy.latest.num_versions if policy.HasField("latest") and policy.latest.num_versions else 1
    return list(versions[-n:])


def check_layout(cf: ConfigFile, *, model_dir: Path, display_dir: str, versions: Sequence[int]) -> None:
    cfg = cf.config
    if not versions:
        cf.error(
            "no-version",
            f"model '{cf.model}' has no version directory (e.g. {display_dir}/1); "
            "Triton needs at least one version to load it",
            at=None,
        )
        return
    chosen = selected_versions(cfg, versions)
    if cfg.version_policy.HasField("specific"):
        missing = [v for v in cfg.version_policy.specific.versions if v not in versions]
        if missing and not chosen:
            cf.error(
                "no-version",
                f"none of the versions {list(cfg.version_policy.specific.versions)} named by version_policy "
                f"exist (found {list(versions)})",
                at="version_policy",
            )
            return
        if missing:
            cf.warning(
                "version-missing",
                f"version_policy names version(s) {missing} that do not exist",
                at="version_policy",
            )
    filename = expected_model_file(cfg)
    if not cfg.platform and not cfg.backend:
        inferable = any((model_dir / str(v) / f).exists() for v in chosen for f in AUTO_FILES)
        if not inferable:
            cf.error(
                "no-backend",
                "config sets neither platform nor backend, and no model file tells Triton which to use",
                at="name",
            )
        return
    if filename is not None:
        for v in chosen:
            if not (model_dir / str(v) / filename).exists():
                cf.error(
                    "model-file-missing",
                    f"version {v} has no {filename} (expected at {display_dir}/{v}/{filename} for "
                    f"{'platform ' + cfg.platform if cfg.platform else 'backend ' + cfg.backend})",
                    at="default_model_filename" if cfg.default_model_filename else None,
                )
    for i, out in enumerate(cfg.output):
        if out.label_filename and not (model_dir / out.label_filename).is_file():
            cf.error(
                "label-file-missing",
                f"output '{out.name}' names label file '{out.label_filename}', which is not in {display_dir}",
                at=f"output[{i}].label_filename",
            )


def config_missing(model: str, model_dir: Path, display_dir: str, versions: Sequence[int]) -> Problem:
    """No config.pbtxt: fine when Triton can auto-complete it from the model file, else an error."""
    auto = [f for v in versions for f in _AUTOCOMPLETE_FILES if (model_dir / str(v) / f).exists()]
    if auto:
        return Problem(
            severity="warning",
            model=model,
            file=f"{display_dir}/config.pbtxt",
            line=None,
            code="config-missing",
            message=f"no config.pbtxt; Triton must auto-complete it from {auto[0]} "
            "(write one with `tritonkit build` to pin tensors and batching)",
        )
    return Problem(
        severity="error",
        model=model,
        file=f"{display_dir}/config.pbtxt",
        line=None,
        code="config-missing",
        message="no config.pbtxt and no model file Triton could auto-complete one from",
    )


def check_symlinks(model: str, model_dir: Path, display_dir: str, root: Path) -> list[Problem]:
    """Links that resolve outside the repository: Triton would follow them, we refuse them."""
    problems = []
    for dirpath, dirnames, filenames in os.walk(model_dir):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                rel = path.relative_to(model_dir)
                problems.append(
                    Problem(
                        severity="error",
                        model=model,
                        file=f"{display_dir}/{rel}",
                        line=None,
                        code="symlink-escape",
                        message=f"symbolic link points outside the repository (to {path.resolve()})",
                    )
                )
    return problems
