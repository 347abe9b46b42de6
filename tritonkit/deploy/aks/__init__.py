"""Deploy to AKS, split by role.

``options`` (settings and their checks), ``render``, ``node_agents``, ``monitoring`` and
``grafana`` (plain objects, no cluster), ``hardening`` (the security baseline and its stated
exceptions) and ``checks`` (that baseline asserted on every rendered object), ``helm`` (a chart of
the same objects), ``crd_schemas`` (the custom-resource schemas every object is checked against),
``vllm`` and ``trtllm`` (what an LLM backend's models add) and ``deployer`` (plan, server-side
apply, rollout, smoke test).
"""

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.deploy.aks.deployer import AksDeployer
    from tritonkit.deploy.aks.options import (
        DEFAULT_IMAGE,
        QUEUE_METRIC,
        AksOptions,
        ModelRepositoryUri,
        parse_model_repository,
    )

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "DEFAULT_IMAGE",
    "QUEUE_METRIC",
    "AksDeployer",
    "AksOptions",
    "ModelRepositoryUri",
    "parse_model_repository",
]
