"""Moved to tritonkit.kinds.tensorrtllm (stage, engine, parameters, expand, models) and kinds.releases.

Kept for tritonkit.deploy.aks_trtllm and tritonkit.deploy.aml until deploy asks the kinds
registry; remove at merge.
"""

# moved to tritonkit.kinds.tensorrtllm / tritonkit.kinds.releases; kept for tritonkit.deploy.aks_trtllm
from tritonkit.kinds.releases import trtllm_image, trtllm_release
from tritonkit.kinds.tensorrtllm import trtllm_models  # kept for tritonkit.deploy.aml
from tritonkit.kinds.tensorrtllm.engine import EngineConfigError, read_engine_config
from tritonkit.kinds.tensorrtllm.stage import mapped_local_path

__all__ = [
    "EngineConfigError",
    "mapped_local_path",
    "read_engine_config",
    "trtllm_image",
    "trtllm_models",
    "trtllm_release",
]
