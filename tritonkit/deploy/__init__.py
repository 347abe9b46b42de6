"""Deploy a validated model repository to Azure ML managed online endpoints or AKS.

``AmlDeployer`` and ``AksDeployer`` follow the :class:`Deployer` protocol: ``plan()`` runs every
offline check and renders the artifacts (Azure ML CLI v2 YAML, Kubernetes manifests),
``apply(plan)`` deploys and smoke-tests, ``status()`` reports the live state. The Azure and
Kubernetes SDKs are imported only when a deployer needs them.

Split by target: ``deploy.aks`` and ``deploy.aml`` are packages with one module per role
(options and their checks, rendering, deploying); ``base`` holds the protocol and the atomic
artifact writer, ``checks`` the repository checks both targets share, ``smoke`` the smoke test.
"""

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.deploy.aks import AksDeployer, AksOptions
    from tritonkit.deploy.aml import AmlDeployer, AmlOptions, ProbeOptions
    from tritonkit.deploy.base import (
        Artifact,
        Deployer,
        DeployPlan,
        DeployResult,
        DeployStatus,
        SmokeResult,
        write_artifacts,
    )
    from tritonkit.deploy.checks import ModelSummary, max_concurrent_requests

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "AksDeployer",
    "AksOptions",
    "AmlDeployer",
    "AmlOptions",
    "Artifact",
    "DeployPlan",
    "DeployResult",
    "DeployStatus",
    "Deployer",
    "ModelSummary",
    "ProbeOptions",
    "SmokeResult",
    "max_concurrent_requests",
    "write_artifacts",
]
