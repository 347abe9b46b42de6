"""Model repositories: build them from specs and model files, scan them, validate them.

``build_spec`` / ``build_onnx_model`` write ``<repo>/<model>/<version>/<file>`` atomically,
``scan_repository`` reads a repository back, ``validate_repository`` finds statically, with
file and line, what Triton would reject at load time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.kinds.entry import ModelEntry
    from tritonkit.repository.builder import BuildResult, BuiltModel, build_onnx_model, build_spec
    from tritonkit.repository.image_packages import ImageTarget
    from tritonkit.repository.manifest import MANIFEST_NAME
    from tritonkit.repository.onnx_import import OnnxSignature, read_onnx_signature
    from tritonkit.repository.scan import RepoModel, scan_repository
    from tritonkit.repository.spec import PipelineSpec, load_spec
    from tritonkit.repository.validator import Problem, ValidationReport, image_target, validate_repository

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "MANIFEST_NAME",
    "BuildResult",
    "BuiltModel",
    "ImageTarget",
    "ModelEntry",
    "OnnxSignature",
    "PipelineSpec",
    "Problem",
    "RepoModel",
    "ValidationReport",
    "build_onnx_model",
    "build_spec",
    "image_target",
    "load_spec",
    "read_onnx_signature",
    "scan_repository",
    "validate_repository",
]
