"""Deploy to an Azure ML managed online endpoint (no-code Triton), split by role.

``options`` (settings and their checks), ``checks`` (the repository, its upload layout, the
SDK's validation), ``render`` (SDK entities and CLI v2 YAML), ``upload`` (what Azure ML
receives), ``azure`` (every Azure call and its error mapping) and ``deployer`` (plan, apply,
status).
"""

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.deploy.aml.checks import aml_layout_problems, check_yaml, sdk_validate
    from tritonkit.deploy.aml.deployer import AmlDeployer, triton_base_url
    from tritonkit.deploy.aml.options import AmlOptions, ProbeOptions, parse_traffic, traffic_problems

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "AmlDeployer",
    "AmlOptions",
    "ProbeOptions",
    "aml_layout_problems",
    "check_yaml",
    "parse_traffic",
    "sdk_validate",
    "traffic_problems",
    "triton_base_url",
]
