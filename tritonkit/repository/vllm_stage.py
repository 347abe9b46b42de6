"""Moved to tritonkit.kinds.vllm (stage.py, parse.py, layout.py) and tritonkit.kinds.paths.

Kept for tritonkit.deploy.aks_vllm until deploy asks the kinds registry; remove at merge.
"""

# moved to tritonkit.kinds.vllm / tritonkit.kinds.paths; kept for tritonkit.deploy.aks_vllm
from tritonkit.kinds.paths import DEFAULT_SERVING_ROOT
from tritonkit.kinds.vllm.stage import BACKEND, ENGINE_ARGS_FILE

__all__ = ["BACKEND", "DEFAULT_SERVING_ROOT", "ENGINE_ARGS_FILE"]
