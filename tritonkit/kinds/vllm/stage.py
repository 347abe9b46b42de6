"""Moved to :mod:`tritonkit.kinds.vllm.spec` (#30 item 7: "stage" means a pipeline step only).

Kept, with the old class name, while other branches import it; see docs/changelog.md.
"""

from tritonkit.kinds.vllm.spec import *  # noqa: F403
from tritonkit.kinds.vllm.spec import VllmSpec

VllmStage = VllmSpec
