"""The metrics tritonkit's AKS monitoring reads exist on a real tritonserver, with the types the
expressions assume: every Triton series named in the KEDA query, the rules and the dashboard is on
the server's /metrics, counters are TYPE counter (so rate() is right) and carry the `model` label
the dashboard groups by.
"""

from __future__ import annotations

import re
import urllib.request
from typing import Any

import pytest

from tests.unit.test_deploy_aks_monitoring import TRITON_COUNTERS, all_expressions, metric_uses, rendered

pytestmark = pytest.mark.integration

_TYPE = re.compile(r"^# TYPE (\S+) (\S+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def triton_metrics(example_server: Any) -> str:
    with urllib.request.urlopen(example_server.metrics_url, timeout=10) as response:  # loopback only
        return str(response.read().decode())


def test_triton_exports_every_counter_the_aks_expressions_read(triton_metrics: str) -> None:
    types = dict(_TYPE.findall(triton_metrics))
    assert {name: types.get(name) for name in TRITON_COUNTERS} == dict.fromkeys(TRITON_COUNTERS, "counter")
    for combo in ({}, {"monitoring": "prometheus-operator", "prometheus_query_endpoint": None}):
        for expr in all_expressions(rendered(**combo)):
            for name, in_rate in metric_uses(expr):
                if name.startswith("nv_"):
                    assert types.get(name) == "counter" and in_rate, (name, expr)


def test_triton_counters_carry_the_model_label_the_dashboard_groups_by(triton_metrics: str) -> None:
    samples = [line for line in triton_metrics.splitlines() if line.startswith("nv_inference_count{")]
    assert samples and all('model="' in line for line in samples)
