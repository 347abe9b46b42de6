"""The security baseline of every workload tritonkit renders for AKS, and its stated exceptions.

Triton and every container tritonkit adds beside it run as a high non-root UID/GID with a
read-only root filesystem, no capabilities, no privilege escalation and the runtime's default
seccomp profile; what Triton writes goes to ``emptyDir`` mounts (``/tmp``, a memory-backed
``/dev/shm``). Credentials arrive as mounted Secret files, never as environment variables in the
pod spec. The GPU-node agents (NVIDIA device plugin, DCGM exporter) need host access for their
job: each exception is stated on the object (``tritonkit.io/host-access`` and checkov's
``checkov.io/skip<n>`` annotations, which carry the reason).
"""

from __future__ import annotations

import shlex
from typing import Any

from tritonkit.deploy.aks.options import (
    RESTRICTED_APIS,
    RESTRICTED_HEADER,
    SECRETS_DIR,
    TRITON_UID,
    AksOptions,
    ModelRepositoryUri,
)

SECCOMP = {"type": "RuntimeDefault"}
POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": TRITON_UID,
    "runAsGroup": TRITON_UID,
    "fsGroup": TRITON_UID,
    "seccompProfile": SECCOMP,
}
CONTAINER_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": TRITON_UID,
    "runAsGroup": TRITON_UID,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": SECCOMP,
}
STORAGE_DIR = f"{SECRETS_DIR}/storage"
ADMIN_DIR = f"{SECRETS_DIR}/admin"
#: The annotation that states why a node agent departs from the baseline.
HOST_ACCESS = "tritonkit.io/host-access"


def storage_key_used(o: AksOptions, uri: ModelRepositoryUri) -> bool:
    """An as:// repository read with the storage account key (not workload identity)."""
    return uri.scheme == "as" and o.workload_identity_client_id is None


def secret_volume(name: str, secret: str) -> dict[str, Any]:
    # 0440 with the pod's fsGroup: readable by the non-root user, by nobody else.
    return {"name": name, "secret": {"secretName": secret, "defaultMode": 0o440}}


def secret_mount(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "mountPath": path, "readOnly": True}


def launch(o: AksOptions, *, storage_key: bool) -> dict[str, list[str]]:
    """Triton's ``command``: ``tritonserver`` itself, or a shell that reads the mounted credentials.

    Triton takes an as:// repository's key from ``AZURE_STORAGE_ACCOUNT``/``AZURE_STORAGE_KEY``
    and the admin key from its command line: the shell reads both from the Secret files and
    execs Triton, so neither value is written into the pod spec. The manifest's ``args`` stay
    Triton's own flags (the shell passes them on as ``"$@"``).
    """
    lines: list[str] = []
    if storage_key:
        for key in ("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"):
            lines.append(f'{key}="$(cat {STORAGE_DIR}/{key})"; export {key}')
    extra = ""
    if o.restricted_api_secret is not None:
        lines.append(f'ADMIN_KEY="$(cat {ADMIN_DIR}/key)"')
        restriction = shlex.quote(f"{RESTRICTED_APIS}:{RESTRICTED_HEADER}=") + '"$ADMIN_KEY"'
        extra = f" --http-restricted-api={restriction} --grpc-restricted-protocol={restriction}"
    if not lines:
        return {"command": ["tritonserver"]}
    script = "\n".join(["set -eu", *lines, f'exec tritonserver "$@"{extra}'])
    return {"command": ["/bin/sh", "-c", script, "tritonserver"]}


#: the environment variable a tritonkit container's shell reads the admin key into
ADMIN_ENV = "TRITON_ADMIN_KEY"


def tritonkit_launch(o: AksOptions) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """``tritonkit``'s command in a container beside Triton, the arguments and mounts it adds.

    Once Triton's admin APIs are restricted (the front lists models through statistics, the
    healer loads models through the repository API), a shell reads the admin key from its Secret
    file into the process's environment only (never the pod spec) and tritonkit sends it as the
    restricted header."""
    if o.restricted_api_secret is None:
        return ["tritonkit"], [], []
    read = f'{ADMIN_ENV}="$(cat {ADMIN_DIR}/key)"; export {ADMIN_ENV}'
    script = "\n".join(["set -eu", read, 'exec tritonkit "$@"'])
    return (
        ["/bin/sh", "-c", script, "tritonkit"],
        ["--restricted-header", f"{RESTRICTED_HEADER}={ADMIN_ENV}"],
        [secret_mount("admin-key", ADMIN_DIR)],
    )


def guaranteed(cpu: str, memory: str) -> dict[str, Any]:
    """requests = limits (the Guaranteed QoS class when every container of the pod has it)."""
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}


def zone_spread(o: AksOptions) -> list[dict[str, Any]]:
    """Spread replicas over zones when there can be more than one; ScheduleAnyway, so a GPU pool
    in a single zone still schedules every replica."""
    if not o.zone_spread or o.max_pods <= 1:
        return []
    return [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": o.selector()},
        }
    ]


def stated_exceptions(summary: str, skips: dict[str, str]) -> dict[str, str]:
    """Annotations saying why an object departs from the baseline: one line for people, and one
    ``checkov.io/skip<n>: CHECK=reason`` per check the departure fails."""
    out = {HOST_ACCESS: summary}
    for i, (check, reason) in enumerate(sorted(skips.items()), start=1):
        out[f"checkov.io/skip{i}"] = f"{check}={reason}"
    return out


def node_agent_policy(
    name: str, match: dict[str, str], *, port: int | None = None, scraper_namespace: str | None = None
) -> dict[str, Any]:
    """A kube-system NetworkPolicy for a node agent: no egress, and ingress only from the metrics
    scraper on its port (none at all for an agent that listens only on a unix socket)."""
    ingress: list[dict[str, Any]] = []
    if port is not None and scraper_namespace is not None:
        ingress.append(
            {
                "from": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": scraper_namespace}}}
                ],
                "ports": [{"protocol": "TCP", "port": port}],
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": "kube-system", "labels": dict(match)},
        "spec": {
            "podSelector": {"matchLabels": dict(match)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": [],
        },
    }
