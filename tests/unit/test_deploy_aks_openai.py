"""`deploy aks --openai-port`: the OpenAI front as a container beside Triton, hardened like it, with
its Service port, probes, key file, scrape endpoint and Helm value (schemas, the hardening check
and `helm lint`/`helm template` run on it through the VARIANTS of test_deploy_aks/test_deploy_helm)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_deploy_aks import aks, by_kind, render
from tests.unit.test_deploy_helm import MODELS, template, write_chart
from tritonkit.deploy.aks.options import option_problems

FRONT = {"openai_port": 9000, "openai_image": "myacr.azurecr.io/tritonkit-openai:0.1"}


def _containers(**kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    dep = by_kind(render(**FRONT, **kw))["Deployment"]
    triton, front, healer = dep["spec"]["template"]["spec"]["containers"]
    assert healer["name"] == "tritonkit-heal"  # the front's image runs the healer too
    return triton, front


def test_front_runs_beside_triton_with_its_security_context_when_a_port_is_given() -> None:
    triton, front = _containers(openai_api_key_secret="openai-keys")
    assert front["securityContext"] == triton["securityContext"]
    assert front["resources"]["requests"] == front["resources"]["limits"]  # Guaranteed QoS kept
    assert front["image"] == FRONT["openai_image"] and front["command"] == ["tritonkit"]
    assert front["args"][:2] == ["openai", "grpc://127.0.0.1:8001"]
    # answers stream over Triton's HTTP generate_stream (the front's cheaper hot path), in the pod
    assert front["args"][front["args"].index("--stream-url") + 1] == "http://127.0.0.1:8000"
    assert front["args"][-2:] == ["--openai-api-key-file", "/var/run/secrets/tritonkit/openai/keys"]
    assert front["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": "openai"}
    assert front["startupProbe"]["httpGet"]["path"] == "/health/ready"
    # its own loop only: a restarting Triton does not get the front killed
    assert front["livenessProbe"]["httpGet"] == {"path": "/health/live", "port": "openai"}
    # keys are a file, never an env var; the one env from the pod spec is the CPU request
    assert not any("secretKeyRef" in e.get("valueFrom", {}) for e in front["env"])
    (workers,) = [e for e in front["env"] if e["name"] == "TRITONKIT_OPENAI_WORKERS"]
    assert workers["valueFrom"]["resourceFieldRef"] == {
        "containerName": "openai-front",
        "resource": "requests.cpu",
        "divisor": "1",
    }
    assert front["args"][front["args"].index("--workers") + 1] == "$(TRITONKIT_OPENAI_WORKERS)"


def test_front_keys_come_from_a_secret_mounted_read_only_when_a_secret_is_named() -> None:
    spec = by_kind(render(**FRONT, openai_api_key_secret="openai-keys"))["Deployment"]["spec"]["template"][
        "spec"
    ]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "openai-keys"]
    assert volume["secret"] == {"secretName": "openai-keys", "defaultMode": 0o440}
    mounts = {m["name"]: m for m in spec["containers"][1]["volumeMounts"]}
    assert mounts["openai-keys"]["readOnly"] and "openai-keys" not in {
        m["name"] for m in spec["containers"][0]["volumeMounts"]
    }


def test_front_reads_the_admin_key_file_when_triton_restricts_its_admin_apis() -> None:
    _, front = _containers(restricted_api_secret="triton-admin")
    assert (
        front["command"][:2] == ["/bin/sh", "-c"]
        and "cat /var/run/secrets/tritonkit/admin/key" in front["command"][2]
    )
    assert "triton-admin-key=TRITON_ADMIN_KEY" in front["args"]


def test_front_port_is_served_scraped_and_admitted_when_rendered() -> None:
    kinds = by_kind(render(**FRONT, monitoring="prometheus-operator", prometheus_query_endpoint=None))
    assert {
        "name": "openai",
        "port": 9000,
        "targetPort": "openai",
        "protocol": "TCP",
        "appProtocol": "http",
    } in (kinds["Service"]["spec"]["ports"])
    assert {"port": "openai", "path": "/metrics", "interval": "15s"} in kinds["ServiceMonitor"]["spec"][
        "endpoints"
    ]
    serving, scraping = kinds["NetworkPolicy"]["spec"]["ingress"]
    assert {"protocol": "TCP", "port": 9000} in serving["ports"] and {
        "protocol": "TCP",
        "port": 9000,
    } in scraping["ports"]


def test_no_front_is_rendered_without_a_port() -> None:
    (container,) = by_kind(render())["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "tritonserver"


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"openai_port": 9000}, "needs --openai-image"),
        ({**FRONT, "openai_port": 8001}, "other than Triton's"),
        ({"openai_image": "x:1"}, "without --openai-port"),
        ({**FRONT, "openai_api_key_secret": "Not_A_Name"}, "--openai-api-key-secret"),
    ],
)
def test_front_options_are_refused_when_they_cannot_work(kw: dict[str, Any], words: str) -> None:
    problems = option_problems(aks(**kw).options)
    assert any(words in p for p in problems), problems


def test_front_image_is_a_chart_value_when_rendered_as_helm(tmp_path: Path) -> None:
    chart, _ = write_chart(tmp_path, MODELS, **FRONT)
    docs = template(chart, "--set", "openai.image=myacr.azurecr.io/tritonkit-openai:0.2")
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    assert (
        dep["spec"]["template"]["spec"]["containers"][1]["image"] == "myacr.azurecr.io/tritonkit-openai:0.2"
    )


def test_dashboard_gains_the_fronts_tokens_by_model_and_key_when_a_front_is_rendered() -> None:
    from tests.unit.test_deploy_aks_monitoring import metric_uses, rendered
    from tritonkit.deploy.aks.render import DASHBOARD_FILE

    board = rendered(**FRONT).files[DASHBOARD_FILE]
    front = [p for p in board["panels"] if p["title"].startswith("OpenAI front")]
    assert len(front) == 4 and len({p["id"] for p in board["panels"]}) == len(board["panels"])
    exprs = [t["expr"] for p in front for t in p["targets"]]
    for expr in exprs:  # parsed by Prometheus' grammar; the front's counters only through rate/increase
        uses = metric_uses(expr)
        assert uses and all(
            name in {"tritonkit_openai_tokens_total", "tritonkit_openai_requests_total"} and in_rate
            for name, in_rate in uses
        ), expr
    assert any("by (key, kind)" in e for e in exprs) and any("by (model, kind)" in e for e in exprs)
    plain = rendered().files[DASHBOARD_FILE]
    assert not any(p["title"].startswith("OpenAI front") for p in plain["panels"])
