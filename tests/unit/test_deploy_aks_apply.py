"""`AksDeployer.apply` through the official kubernetes client against a stand-in API server.

No Kubernetes API server can run here, so a small HTTP server on 127.0.0.1 answers the
discovery documents (/version, /api, /apis, per-group resource lists) of a cluster that has the
built-in kinds only, and records every PATCH. The kubernetes client, its DynamicClient discovery
and its server-side apply are the real ones; what is faked is the cluster's side of the wire.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.unit.test_deploy_aks import QUERY_ENDPOINT, write_repo
from tritonkit.deploy.aks import AksDeployer, AksOptions
from tritonkit.errors import KubernetesError

# group/version -> [(plural, kind, namespaced)]
BUILTIN_RESOURCES = {
    "v1": [
        ("namespaces", "Namespace", False),
        ("services", "Service", True),
        ("serviceaccounts", "ServiceAccount", True),
        ("configmaps", "ConfigMap", True),
    ],
    "apps/v1": [("deployments", "Deployment", True), ("daemonsets", "DaemonSet", True)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    "networking.k8s.io/v1": [("networkpolicies", "NetworkPolicy", True)],
    "autoscaling/v2": [("horizontalpodautoscalers", "HorizontalPodAutoscaler", True)],
}


PROMETHEUS_OPERATOR = {
    "monitoring.coreos.com/v1": [
        ("servicemonitors", "ServiceMonitor", True),
        ("podmonitors", "PodMonitor", True),
        ("prometheusrules", "PrometheusRule", True),
    ]
}


def _resource_list(served: dict[str, Any], group_version: str) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {
                "name": plural,
                "singularName": kind.lower(),
                "namespaced": namespaced,
                "kind": kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            }
            for plural, kind, namespaced in served[group_version]
        ],
    }


def _groups(served: dict[str, Any]) -> dict[str, Any]:
    groups = []
    for gv in served:
        if "/" not in gv:
            continue
        name, version = gv.split("/")
        entry = {"groupVersion": gv, "version": version}
        groups.append({"name": name, "versions": [entry], "preferredVersion": entry})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


class _Handler(BaseHTTPRequestHandler):
    patches: list[dict[str, Any]]
    served: dict[str, Any]

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = urlsplit(self.path).path
        if path == "/version":
            self._send(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"})
        elif path == "/api":
            self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        elif path == "/apis":
            self._send(200, _groups(self.served))
        elif path == "/api/v1":
            self._send(200, _resource_list(self.served, "v1"))
        elif path.startswith("/apis/") and path[len("/apis/") :] in self.served:
            self._send(200, _resource_list(self.served, path[len("/apis/") :]))
        else:
            self._send(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})

    def do_PATCH(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.patches.append(
            {
                "path": url.path,
                "query": parse_qs(url.query),
                "content_type": self.headers["Content-Type"],
                "body": body,
            }
        )
        self._send(200, body)


@pytest.fixture()
def api_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    # The DynamicClient caches discovery in the temp dir: keep it inside the test's.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    patches: list[dict[str, Any]] = []
    # A cluster with the built-in kinds and the Prometheus Operator's CRDs, no KEDA, no Azure add-on.
    served = {**BUILTIN_RESOURCES, **PROMETHEUS_OPERATOR}
    handler = type("Handler", (_Handler,), {"patches": patches, "served": served})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", patches
    finally:
        server.shutdown()
        server.server_close()


def _deployer(url: str, repo: Path, **kw: Any) -> AksDeployer:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = url
    cfg.retries = 0
    kw.setdefault("prometheus_query_endpoint", QUERY_ENDPOINT)
    options = AksOptions(repository=repo, model_repository="as://acct01/models/triton", **kw)
    return AksDeployer(options=options, api_client=client.ApiClient(cfg))


def test_apply_stops_at_the_first_custom_resource_the_cluster_lacks_and_names_the_add_on(
    api_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, patches = api_server
    d = _deployer(url, write_repo(tmp_path / "repo"))
    with pytest.raises(KubernetesError, match="does not serve this API") as info:
        d.apply(d.plan())
    assert "--enable-azure-monitor-metrics" in (info.value.hint or "")
    # everything before the DCGM exporter's PodMonitor went out, server-side applied, in order
    kinds = [p["body"]["kind"] for p in patches]
    assert kinds == ["DaemonSet", "NetworkPolicy", "Namespace", "DaemonSet", "NetworkPolicy"]
    first = patches[0]
    assert first["path"] == "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin-daemonset"
    assert first["content_type"] == "application/apply-patch+yaml"
    assert first["query"]["fieldManager"] == ["tritonkit"] and first["query"]["force"] == ["true"]
    policies = "/apis/networking.k8s.io/v1/namespaces/kube-system/networkpolicies"
    assert patches[1]["path"] == f"{policies}/nvidia-device-plugin"
    assert patches[2]["path"] == "/api/v1/namespaces/triton"


def test_apply_names_the_keda_add_on_when_the_cluster_lacks_keda(
    api_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, patches = api_server
    d = _deployer(
        url,
        write_repo(tmp_path / "repo"),
        gpu_count=0,
        monitoring="prometheus-operator",
        prometheus_query_endpoint=None,
    )
    with pytest.raises(KubernetesError, match="does not serve this API") as info:
        d.apply(d.plan())
    assert "--enable-keda" in (info.value.hint or "")
    # the operator's ServiceMonitor went out (the cluster has its CRD); the ScaledObject did not
    assert [p["body"]["kind"] for p in patches][-2:] == ["NetworkPolicy", "ServiceMonitor"]
    assert patches[-1]["path"] == "/apis/monitoring.coreos.com/v1/namespaces/triton/servicemonitors/triton"


def test_apply_waits_for_the_rollout_after_every_object_when_all_kinds_are_served(
    api_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, patches = api_server
    d = _deployer(url, write_repo(tmp_path / "repo"), gpu_count=0, monitoring="none", autoscaler="none")
    # This stand-in has no Deployment status to read: the rollout wait is what fails.
    with pytest.raises(KubernetesError, match="reading the Deployment failed: HTTP 404"):
        d.apply(d.plan())
    assert [p["body"]["kind"] for p in patches] == [
        "DaemonSet",
        "NetworkPolicy",
        "Namespace",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
    ]
