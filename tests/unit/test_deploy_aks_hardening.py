"""The hardening baseline of the AKS output (issue #34): every object, every variant, image pins,
Guaranteed QoS, NetworkPolicy, PodDisruptionBudget and zone spread, and the check that guards them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_deploy_aks import VARIANTS, aks, by_kind, render, write_repo
from tritonkit.deploy.aks.checks import hardening_problems
from tritonkit.deploy.aks.options import (
    DCGM_EXPORTER_IMAGE,
    DEFAULT_IMAGE,
    DEVICE_PLUGIN_IMAGE,
    option_problems,
    parse_image_digest,
    read_image_lock,
)
from tritonkit.errors import DeployValidationError

DIGEST = "sha256:" + "ab" * 32
ALL_PINNED = {DEFAULT_IMAGE: DIGEST, DEVICE_PLUGIN_IMAGE: DIGEST, DCGM_EXPORTER_IMAGE: DIGEST}


def objects(**kw: Any) -> list[dict[str, Any]]:
    return [doc for docs in render(**kw).values() for doc in docs]


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    pod = doc["spec"]["template"]["spec"]
    return [*pod.get("initContainers", []), *pod["containers"]]


@pytest.mark.parametrize("variant", list(VARIANTS.values()), ids=list(VARIANTS))
def test_hardening_check_accepts_every_object_when_rendered(variant: dict[str, Any]) -> None:
    d = aks(**variant)
    assert hardening_problems(objects(**variant), d.options) == []


def test_hardening_check_refuses_an_object_when_a_baseline_property_is_missing() -> None:
    d = aks()
    docs = objects()
    dep = next(doc for doc in docs if doc["kind"] == "Deployment")
    broken = copy.deepcopy(dep)
    c = broken["spec"]["template"]["spec"]["containers"][0]
    c["securityContext"]["readOnlyRootFilesystem"] = False
    c["env"].append({"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}})
    c["resources"]["limits"]["cpu"] = "8"
    broken["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 1000
    del c["securityContext"]["runAsUser"]
    problems = "\n".join(hardening_problems([broken if doc is dep else doc for doc in docs], d.options))
    assert "root filesystem is writable" in problems
    assert "Secret passed as the environment variable K" in problems
    assert "not Guaranteed QoS" in problems
    assert "not a high UID" in problems


def test_node_agents_state_their_host_access_when_rendered() -> None:
    for doc in objects():
        if doc["kind"] != "DaemonSet":
            continue
        notes = doc["metadata"]["annotations"]
        assert notes["tritonkit.io/host-access"]
        skips = [v for k, v in notes.items() if k.startswith("checkov.io/skip")]
        assert skips and all("=" in s and s.split("=", 1)[1] for s in skips)  # each with its reason
        pod = doc["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in containers(doc):
            assert c["livenessProbe"] and c["readinessProbe"]
            assert set(c["resources"]["limits"]) == {"cpu", "memory"}


def test_images_are_pinned_and_pulled_if_not_present_when_digests_are_given() -> None:
    d = aks(image_digests=ALL_PINNED)
    docs = objects(image_digests=ALL_PINNED)
    for doc in docs:
        if doc["kind"] in ("Deployment", "DaemonSet"):
            for c in containers(doc):
                assert c["image"].endswith("@" + DIGEST) and c["imagePullPolicy"] == "IfNotPresent"
    assert not [w for w in d._warnings(*_plan_inputs(d), _rendered(d)) if "digest" in w]


def _plan_inputs(d: Any) -> tuple[Any, Any]:
    from tests.unit.test_deploy_aks import MODELS
    from tritonkit.deploy.aks import parse_model_repository

    return parse_model_repository(d.options.model_repository), MODELS


def _rendered(d: Any) -> Any:
    from tritonkit.deploy.aks.render import render as render_all

    uri, models = _plan_inputs(d)
    return render_all(d.options, uri, models)


def test_deploy_warns_once_naming_how_to_pin_when_no_digest_is_given() -> None:
    d = aks()
    warnings = [w for w in d._warnings(*_plan_inputs(d), _rendered(d)) if "digest" in w]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert "--image-digest IMAGE=sha256:" in warnings[0] and "--image-lock" in warnings[0]
    for doc in objects():
        if doc["kind"] in ("Deployment", "DaemonSet"):
            for c in containers(doc):
                assert "@" not in c["image"] and c["imagePullPolicy"] == "Always"


def test_plan_pins_and_warns_when_run_on_a_repository(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    pinned = aks(repository=repo, image_digests=ALL_PINNED).plan()
    assert not [w for w in pinned.warnings if "digest" in w]
    assert ("image", f"{DEFAULT_IMAGE}@{DIGEST}") in pinned.summary
    loose = aks(repository=repo).plan()
    assert len([w for w in loose.warnings if "pinned by digest" in w]) == 1


def test_image_pins_are_refused_when_malformed_or_naming_an_unused_image(tmp_path: Path) -> None:
    assert parse_image_digest(f"{DEFAULT_IMAGE}={DIGEST}") == (DEFAULT_IMAGE, DIGEST)
    with pytest.raises(DeployValidationError, match="IMAGE=sha256"):
        parse_image_digest(f"{DEFAULT_IMAGE}=sha256:short")
    problems = option_problems(aks(image_digests={"example.com/other:1": DIGEST}).options)
    assert any("uses no such image" in p for p in problems)
    lock = tmp_path / "images.lock.json"
    lock.write_text(json.dumps({DEFAULT_IMAGE: DIGEST}))
    assert read_image_lock(lock) == {DEFAULT_IMAGE: DIGEST}
    lock.write_text("[1, 2]")
    with pytest.raises(DeployValidationError, match="not a mapping"):
        read_image_lock(lock)


def test_requests_differing_from_limits_are_refused_when_given() -> None:
    problems = option_problems(aks(cpu_request="2", cpu_limit="4").options)
    assert any("Guaranteed QoS" in p for p in problems)
    assert option_problems(aks(cpu_request="2", cpu_limit="2000m").options) == []


def test_zone_spread_is_added_when_there_can_be_more_than_one_replica() -> None:
    one = by_kind(render(autoscaler="none", replicas=1))["Deployment"]
    assert "topologySpreadConstraints" not in one["spec"]["template"]["spec"]
    many = by_kind(render(autoscaler="none", replicas=3))["Deployment"]
    (spread,) = many["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
    off = by_kind(render(autoscaler="none", replicas=3, zone_spread=False))["Deployment"]
    assert "topologySpreadConstraints" not in off["spec"]["template"]["spec"]


def test_network_policy_admits_serving_traffic_only_from_named_sources_when_service_is_cluster_ip() -> None:
    policy = by_kind(render(ingress_namespaces=("gateway",)))["NetworkPolicy"]
    serving, metrics = policy["spec"]["ingress"]
    assert serving["from"] == [
        {"podSelector": {}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway"}}},
    ]
    scraper = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}
    assert metrics["from"] == [scraper]
    external = by_kind(render(service_type="LoadBalancer"))["NetworkPolicy"]
    assert "from" not in external["spec"]["ingress"][0]  # a load balancer's clients have no selector


def test_network_policy_and_pdb_are_left_out_when_switched_off() -> None:
    kinds = [d["kind"] for d in objects(network_policy=False, pod_disruption_budget=False)]
    assert "PodDisruptionBudget" not in kinds
    assert "NetworkPolicy" in kinds  # the node agents keep theirs
    d = aks(network_policy=False, pod_disruption_budget=False)
    assert hardening_problems(objects(network_policy=False, pod_disruption_budget=False), d.options) == []
