"""Run a real tritonserver locally (no Docker, no GPU) and the CPU backends it needs.

``LocalTritonServer`` starts the ``tritonserver`` binary shipped in the ``nvidia-pytriton``
wheel (extra ``server``) with a backend directory tritonkit prepares: the Python backend and a
Python-based ``onnxruntime`` backend, so production configs load unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.server._heal import Healer
    from tritonkit.server._install import (
        TritonInstallation,
        find_installation,
        prepare_backend_directory,
    )
    from tritonkit.server._local import LocalTritonServer, gpu_present, resolve_model_config_name
    from tritonkit.server._remote_heal import RemoteTriton, run_healer

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "Healer",
    "LocalTritonServer",
    "RemoteTriton",
    "TritonInstallation",
    "find_installation",
    "gpu_present",
    "prepare_backend_directory",
    "resolve_model_config_name",
    "run_healer",
]
