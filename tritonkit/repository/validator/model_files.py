"""Configs checked against their model files: ONNX graph I/O, Python sources, TorchScript names.

This module picks the rules for a config's backend and reports what they find;
the rules live by model format in :mod:`.onnx_files`, :mod:`.python_files` and
:mod:`.torchscript_files`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tritonkit.config import ModelConfig
from tritonkit.repository.onnx_io import OnnxReadError, read_onnx_io
from tritonkit.repository.validator.findings import Finding
from tritonkit.repository.validator.layout import expected_model_file, selected_versions
from tritonkit.repository.validator.onnx_files import onnx_findings
from tritonkit.repository.validator.python_files import decoupled_execute_return, python_findings
from tritonkit.repository.validator.report import ConfigFile
from tritonkit.repository.validator.torchscript_files import torchscript_findings

__all__ = [
    "Finding",
    "check_model_files",
    "decoupled_execute_return",
    "onnx_findings",
    "python_findings",
    "torchscript_findings",
]


def _family(cfg: ModelConfig) -> str | None:
    if cfg.platform == "onnxruntime_onnx" or cfg.backend == "onnxruntime":
        return "onnx"
    if cfg.backend == "python":
        return "python"
    if cfg.platform == "pytorch_libtorch" or cfg.backend == "pytorch":
        return "torchscript"
    if cfg.platform == "tensorrt_plan" or cfg.backend == "tensorrt":
        return "tensorrt"
    return None


def _family_and_file(
    cfg: ModelConfig, model_dir: Path, versions: Sequence[int]
) -> tuple[str | None, str | None]:
    family, filename = _family(cfg), expected_model_file(cfg)
    if family is None and not cfg.platform and not cfg.backend:
        # Triton picks the backend from the file it finds (model.onnx, model.py)
        chosen = selected_versions(cfg, versions)
        for name, fam in (("model.onnx", "onnx"), ("model.py", "python")):
            if any((model_dir / str(v) / name).exists() for v in chosen):
                return fam, name
    return family, filename


def check_model_files(cf: ConfigFile, *, model_dir: Path, display_dir: str, versions: Sequence[int]) -> None:
    """Cross-check ``cf`` against the model file of every version Triton would load."""
    cfg = cf.config
    family, filename = _family_and_file(cfg, model_dir, versions)
    if family is None or filename is None:
        return
    if family == "tensorrt":
        cf.info(
            "model-file-not-inspected",
            f"{filename} is a serialized TensorRT engine; tritonkit does not inspect it, so its tensor "
            "names, data types and shapes are checked only by Triton when it loads the engine",
            at="platform" if cfg.platform else "backend",
        )
        return
    if family == "torchscript":
        for finding in torchscript_findings(cfg):
            _report(cf, finding, prefix="")
        return
    # a finding shared by several versions is reported once, naming them
    grouped: dict[Finding, list[str]] = {}
    for v in selected_versions(cfg, versions):
        path = model_dir / str(v) / filename
        if not path.exists():
            continue  # layout reports model-file-missing
        rel = f"{v}/{filename}"
        if family == "onnx":
            try:
                io = read_onnx_io(path)
            except OnnxReadError as exc:
                findings = [
                    Finding(
                        severity="error",
                        code="model-file-unreadable",
                        message=f"{{file}} is not a readable ONNX model: {exc} (re-export it, or check it "
                        "was not truncated or stored as a Git LFS pointer)",
                        at="default_model_filename" if cfg.default_model_filename else None,
                    )
                ]
            else:
                findings = onnx_findings(cfg, io, filename="{file}")
            for f in findings:
                grouped.setdefault(f, []).append(rel)
        else:
            for problem in python_findings(cfg, path, display=f"{display_dir}/{rel}", model=cf.model):
                cf.add(problem)
    for finding, files in grouped.items():
        _report(cf, finding, prefix=", ".join(files))


def _report(cf: ConfigFile, f: Finding, *, prefix: str) -> None:
    message = f.message.replace("{file}", prefix) if prefix else f.message
    {"error": cf.error, "warning": cf.warning, "info": cf.info}[f.severity](f.code, message, at=f.at)
