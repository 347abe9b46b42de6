"""The hardening baseline, checked on every object tritonkit writes for AKS.

:func:`hardening_problems` reads the rendered objects (not the options), so what it accepts is what
a cluster's admission checks see: every workload's pods and containers against the baseline of
:mod:`tritonkit.deploy.aks.hardening`, node agents' departures stated on the object, and the Triton
pods covered by a NetworkPolicy and a PodDisruptionBudget (unless switched off).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tritonkit.deploy.aks.hardening import HOST_ACCESS
from tritonkit.deploy.aks.options import TRITON_UID, AksOptions, quantity

WORKLOADS = frozenset({"Deployment", "DaemonSet", "StatefulSet", "Job"})
#: checkov's high-UID line (CKV_K8S_40): UIDs below it may collide with host users.
MIN_HIGH_UID = 10_000


def _seccomp(pod: Mapping[str, Any], c: Mapping[str, Any]) -> str | None:
    for sc in (c.get("securityContext") or {}, pod.get("securityContext") or {}):
        profile = sc.get("seccompProfile")
        if profile:
            return str(profile.get("type"))
    return None


def _run_as(pod: Mapping[str, Any], c: Mapping[str, Any], key: str) -> Any:
    own = (c.get("securityContext") or {}).get(key)
    return own if own is not None else (pod.get("securityContext") or {}).get(key)


def container_problems(
    where: str, pod: Mapping[str, Any], c: Mapping[str, Any], *, exempt: bool
) -> list[str]:
    """One container against the baseline (``exempt``: a node agent that states its host access)."""
    name = f"{where} container {c.get('name')}"
    problems = _baseline_problems(name, pod, c)
    return problems if exempt else problems + _workload_user_problems(name, pod, c)


def _baseline_problems(name: str, pod: Mapping[str, Any], c: Mapping[str, Any]) -> list[str]:
    """What every container must meet, node agents included."""
    problems: list[str] = []
    sc = c.get("securityContext") or {}
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{name}: allowPrivilegeEscalation is not false")
    if sc.get("privileged"):
        problems.append(f"{name}: privileged")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        problems.append(f"{name}: does not drop ALL capabilities")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{name}: the root filesystem is writable")
    if _seccomp(pod, c) != "RuntimeDefault":
        problems.append(f"{name}: no RuntimeDefault seccomp profile")
    for e in c.get("env") or []:
        if "secretKeyRef" in (e.get("valueFrom") or {}):
            problems.append(f"{name}: Secret passed as the environment variable {e.get('name')} (mount it)")
    res = c.get("resources") or {}
    for kind in ("requests", "limits"):
        for what in ("cpu", "memory"):
            if what not in (res.get(kind) or {}):
                problems.append(f"{name}: no {what} {kind[:-1]}")
    image = str(c.get("image", ""))
    want = "IfNotPresent" if "@sha256:" in image else "Always"
    if c.get("imagePullPolicy") != want:
        problems.append(f"{name}: image {image} wants imagePullPolicy {want}, has {c.get('imagePullPolicy')}")
    return problems


def _workload_user_problems(name: str, pod: Mapping[str, Any], c: Mapping[str, Any]) -> list[str]:
    """What tritonkit's own containers meet beyond the baseline: non-root, no added capability,
    Guaranteed QoS."""
    problems: list[str] = []
    sc = c.get("securityContext") or {}
    res = c.get("resources") or {}
    if sc.get("capabilities", {}).get("add"):
        problems.append(f"{name}: adds capabilities {sc['capabilities']['add']}")
    if _run_as(pod, c, "runAsNonRoot") is not True:
        problems.append(f"{name}: runAsNonRoot is not true")
    uid = _run_as(pod, c, "runAsUser")
    if not isinstance(uid, int) or uid < MIN_HIGH_UID:
        problems.append(f"{name}: runs as UID {uid}, not a high UID (>= {MIN_HIGH_UID})")
    for what in ("cpu", "memory"):
        req, lim = (res.get("requests") or {}).get(what), (res.get("limits") or {}).get(what)
        if req is not None and lim is not None and quantity(str(req)) != quantity(str(lim)):
            problems.append(f"{name}: {what} request {req} != limit {lim} (not Guaranteed QoS)")
    return problems


def workload_problems(doc: Mapping[str, Any], *, token_allowed: bool) -> list[str]:
    """A workload's pod template against the baseline."""
    meta = doc.get("metadata") or {}
    where = f"{doc['kind']} {meta.get('namespace', '')}/{meta.get('name')}"
    exempt = HOST_ACCESS in (meta.get("annotations") or {})
    pod = doc["spec"]["template"]["spec"]
    problems: list[str] = []
    if pod.get("automountServiceAccountToken") is not False and not token_allowed:
        problems.append(f"{where}: mounts a service-account token it does not need")
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        problems.append(f"{where}: shares a host namespace")
    if not exempt:
        psc = pod.get("securityContext") or {}
        if psc.get("fsGroup") is None:
            problems.append(f"{where}: no fsGroup")
        if any("hostPath" in v for v in pod.get("volumes") or []):
            problems.append(f"{where}: mounts a hostPath without stating why ({HOST_ACCESS})")
    for c in [*(pod.get("initContainers") or []), *pod["containers"]]:
        problems += container_problems(where, pod, c, exempt=exempt)
    return problems


def hardening_problems(docs: Iterable[Mapping[str, Any]], o: AksOptions) -> list[str]:
    """Every departure from the baseline in ``docs`` (the objects about to be written or applied)."""
    docs = list(docs)
    problems: list[str] = []
    for doc in docs:
        if doc.get("kind") in WORKLOADS:
            # Workload identity signs the copy init container in with the pod's token.
            token_allowed = doc["kind"] == "Deployment" and o.workload_identity_client_id is not None
            problems += workload_problems(doc, token_allowed=token_allowed)
    kinds = {d.get("kind") for d in docs}
    if o.network_policy and "NetworkPolicy" not in kinds:
        problems.append("no NetworkPolicy covers the Triton pods")
    if o.pod_disruption_budget and "PodDisruptionBudget" not in kinds:
        problems.append("no PodDisruptionBudget covers the Triton pods")
    for doc in docs:
        if doc.get("kind") == "Deployment":
            pod = doc["spec"]["template"]["spec"]
            if o.zone_spread and o.max_pods > 1 and not pod.get("topologySpreadConstraints"):
                problems.append(f"Deployment {doc['metadata']['name']}: replicas are not spread over zones")
            uid = (pod.get("securityContext") or {}).get("runAsUser")
            if uid != TRITON_UID:
                problems.append(f"Deployment {doc['metadata']['name']}: runs as UID {uid}, not {TRITON_UID}")
    return problems
