"""Deploy to an Azure ML managed online endpoint (no-code Triton), split by role.

``options`` (settings and their checks), ``checks`` (the repository, its upload layout, the
SDK's validation), ``render`` (SDK entities and CLI v2 YAML), ``upload`` (what Azure ML
receives), ``azure`` (every Azure call and its error mapping) and ``deployer`` (plan, apply,
status).
"""

from tritonkit.deploy.aml.checks import aml_layout_problems, check_yaml, sdk_validate
from tritonkit.deploy.aml.deployer import AmlDeployer, triton_base_url
from tritonkit.deploy.aml.options import AmlOptions, ProbeOptions, parse_traffic, traffic_problems

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
