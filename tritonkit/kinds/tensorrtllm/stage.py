"""Moved to :mod:`tritonkit.kinds.tensorrtllm.spec` (#30 item 7: "stage" means a pipeline step only).

Kept, with the old names, while other branches import it; see docs/changelog.md.
"""

from tritonkit.kinds.tensorrtllm.spec import *  # noqa: F403
from tritonkit.kinds.tensorrtllm.spec import SPEC_KEYS, TrtllmSpec, is_trtllm_spec

TrtllmStage = TrtllmSpec
STAGE_KEYS = SPEC_KEYS
is_trtllm_stage = is_trtllm_spec
