"""``tritonkit perf --kube N``: the load of one perf run from N pods, as plain Kubernetes objects.

Built-in kinds only, so Kubernetes' own OpenAPI schemas check every one and nothing needs
installing in the cluster:

- a **coordinator Job** (one pod) running ``tritonkit perf ... --listen 0.0.0.0:PORT --workers N``:
  it splits the load, measures the workers' clocks, cuts the windows and computes every figure
  from the union of their raw records, then prints its JSON result to its log;
- a **Service** in front of it, which the workers connect to;
- an **indexed worker Job** (``completionMode: Indexed``, N completions, all in parallel), each pod
  running ``python -m tritonkit.perf.worker --connect SERVICE:PORT``;
- a **ServiceAccount** of their own with no token mounted and **no Role**: no pod calls the
  Kubernetes API (the invoking ``perf`` watches and reads logs with the user's credentials);
- a **NetworkPolicy** letting only the worker pods reach the coordinator's port.

Why not a JobSet (AIPerf's choice): JobSet is a CRD that a cluster must have installed (AKS does
not ship it) and that Kubernetes' own schemas do not cover; the two Jobs and a Service give the
same shape (one leader, N indexed followers, a stable address) with what every cluster has.

Every pod meets :mod:`tritonkit.deploy.aks.hardening`'s baseline. A key (``--key-env VAR``,
``--restricted-header H=VAR``) is a reference to a Secret, mounted as a file that a shell reads
into the coordinator's environment only (never the pod spec); the coordinator hands the headers
to its workers over the in-cluster connection, as a local run hands them to its processes.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit.deploy.aks import hardening as hard
from tritonkit.deploy.aks.options import SECRETS_DIR
from tritonkit.errors import ConfigError

__all__ = ["COORDINATOR_PORT", "RESULT_MARKER", "PerfJob", "render_perf_job"]

#: the port the coordinator accepts workers on
COORDINATOR_PORT = 7070
#: the line after which the coordinator's log holds its JSON result
RESULT_MARKER = "=== tritonkit perf result (JSON) ==="
_RESULT_FILE = "/tmp/perf-result.json"
_KEY_DIR = f"{SECRETS_DIR}/perf"
_PART_OF = "tritonkit-perf"


@dataclass(frozen=True)
class PerfJob:
    """What the objects of one ``perf --kube`` run need."""

    name: str  # DNS-1123 label; the objects are NAME-coordinator, NAME-workers, ...
    namespace: str
    image: str  # an image with tritonkit installed (it runs both the coordinator and the workers)
    workers: int
    perf_args: tuple[str, ...]  # URL MODEL and the load options, as `tritonkit perf` takes them
    #: env var -> (Secret, key): credentials the coordinator reads (--key-env, --restricted-header)
    secret_env: tuple[tuple[str, str, str], ...] = ()
    worker_cpu: str = "1"
    worker_memory: str = "1Gi"
    coordinator_cpu: str = "1"
    coordinator_memory: str = "1Gi"
    #: seconds the coordinator may run (activeDeadlineSeconds): a stuck run ends, the pods go
    deadline_s: int = 3600

    @property
    def pull_policy(self) -> str:
        """A digest-pinned image is pulled once; a tag is pulled every time (it may move)."""
        return "IfNotPresent" if "@sha256:" in self.image else "Always"

    def validate(self) -> None:
        import re

        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?", self.name):
            raise ConfigError(
                f"--kube run name '{self.name}' is not a DNS-1123 label of at most 42 characters",
                hint="lower-case letters, digits and '-' (the objects add -coordinator / -workers)",
            )
        if self.workers < 1:
            raise ConfigError("--kube needs at least 1 worker pod")
        if not self.image:
            raise ConfigError("--kube needs --image: an image with tritonkit installed")

    def labels(self, role: str) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": _PART_OF,
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/component": role,
            "app.kubernetes.io/managed-by": "tritonkit",
        }

    def meta(self, name: str, role: str) -> dict[str, Any]:
        return {"name": name, "namespace": self.namespace, "labels": self.labels(role)}

    @property
    def service_name(self) -> str:
        return f"{self.name}-coordinator"


def _pod(job: PerfJob, role: str, container: dict[str, Any], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"labels": job.labels(role)},
        "spec": {
            "serviceAccountName": job.name,
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "securityContext": dict(hard.POD_SECURITY),
            "containers": [container],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}, *volumes],
        },
    }


def _container(job: PerfJob, name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": job.image,
        "imagePullPolicy": job.pull_policy,
        "securityContext": dict(hard.CONTAINER_SECURITY),
        "resources": hard.guaranteed(cpu, memory),
        "env": [{"name": "HOME", "value": "/tmp"}],
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }


def _coordinator_script(job: PerfJob) -> str:
    """Read the mounted keys into this process's environment, run perf, print its JSON result."""
    lines = ["set -eu"]
    for env, _secret, key in job.secret_env:
        lines.append(f'{env}="$(cat {_KEY_DIR}/{env}/{shlex.quote(key)})"; export {env}')
    lines += [
        f'tritonkit perf "$@" --listen 0.0.0.0:{COORDINATOR_PORT} --workers {job.workers} '
        f"--json {_RESULT_FILE} --quiet",
        f"echo {shlex.quote(RESULT_MARKER)}",
        f"cat {_RESULT_FILE}",
    ]
    return "\n".join(lines)


def coordinator_job(job: PerfJob) -> dict[str, Any]:
    container = _container(job, "coordinator", job.coordinator_cpu, job.coordinator_memory)
    container["command"] = ["/bin/sh", "-c", _coordinator_script(job), "tritonkit"]
    container["args"] = list(job.perf_args)
    container["ports"] = [{"name": "workers", "containerPort": COORDINATOR_PORT, "protocol": "TCP"}]
    volumes = []
    for env, secret, key in job.secret_env:
        vol = f"key-{env.lower().replace('_', '-')}"[:63]
        volumes.append(
            {
                "name": vol,
                "secret": {"secretName": secret, "defaultMode": 0o440, "items": [{"key": key, "path": key}]},
            }
        )
        container["volumeMounts"].append(hard.secret_mount(vol, f"{_KEY_DIR}/{env}"))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job.meta(f"{job.name}-coordinator", "coordinator"),
        "spec": {
            "backoffLimit": 0,  # a failed run is reported, not silently rerun
            "activeDeadlineSeconds": job.deadline_s,
            "ttlSecondsAfterFinished": 3600,
            "template": _pod(job, "coordinator", container, volumes),
        },
    }


def worker_job(job: PerfJob) -> dict[str, Any]:
    container = _container(job, "worker", job.worker_cpu, job.worker_memory)
    container["command"] = ["python", "-m", "tritonkit.perf.worker"]
    container["args"] = [
        "--connect",
        f"{job.service_name}:{COORDINATOR_PORT}",
        "--name",
        "pod-$(JOB_COMPLETION_INDEX)",
    ]
    container["env"].append(
        {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
            },
        }
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job.meta(f"{job.name}-workers", "worker"),
        "spec": {
            "completionMode": "Indexed",
            "completions": job.workers,
            "parallelism": job.workers,
            # a worker that dies fails the step; a restarted one would rejoin a split already fixed
            "backoffLimit": 0,
            "activeDeadlineSeconds": job.deadline_s,
            "ttlSecondsAfterFinished": 3600,
            "template": _pod(job, "worker", container, []),
        },
    }


def service(job: PerfJob) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": job.meta(job.service_name, "coordinator"),
        "spec": {
            "type": "ClusterIP",
            "selector": job.labels("coordinator"),
            "ports": [
                {"name": "workers", "port": COORDINATOR_PORT, "targetPort": "workers", "protocol": "TCP"}
            ],
        },
    }


def service_account(job: PerfJob) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": job.meta(job.name, "identity"),
        "automountServiceAccountToken": False,
    }


def network_policies(job: PerfJob) -> list[dict[str, Any]]:
    """Only this run's worker pods reach the coordinator, on its one port; nothing reaches the
    workers (they only connect out: to the coordinator and the endpoint under test)."""
    from_workers = {
        "from": [{"podSelector": {"matchLabels": job.labels("worker")}}],
        "ports": [{"protocol": "TCP", "port": COORDINATOR_PORT}],
    }
    return [
        _ingress_policy(job, f"{job.name}-coordinator", "coordinator", [from_workers]),
        _ingress_policy(job, f"{job.name}-workers", "worker", []),
    ]


def _ingress_policy(job: PerfJob, name: str, role: str, ingress: list[dict[str, Any]]) -> dict[str, Any]:
    """The NetworkPolicy ``name`` that lets only ``ingress`` reach the run's ``role`` pods."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": job.meta(name, role),
        "spec": {
            "podSelector": {"matchLabels": job.labels(role)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def render_perf_job(job: PerfJob) -> dict[str, list[dict[str, Any]]]:
    """The run's objects by file name, in apply order."""
    job.validate()
    return {
        "00-serviceaccount.yaml": [service_account(job)],
        "10-coordinator.yaml": [service(job), *network_policies(job), coordinator_job(job)],
        "20-workers.yaml": [worker_job(job)],
    }


def objects(files: dict[str, list[dict[str, Any]]]) -> Sequence[dict[str, Any]]:
    return [doc for docs in files.values() for doc in docs]
