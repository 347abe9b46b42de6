"""The healer beside Triton on AKS: ``tritonkit heal`` in a container of Triton's pod.

Triton runs with explicit model control and every model loaded at start (``--load-model=*``), so
a model can be loaded again without restarting the server. NVIDIA's vllm backend unloads a model
whose engine fails its health check (``ENABLE_VLLM_HEALTH_CHECK``, which ``tritonkit build`` sets
on every vLLM stage; r24.12 and later): Triton's readiness turns false, the pod leaves the Service,
and the healer loads the model again (backoff, at most 5 reloads in 10 minutes), asking Triton's
HTTP port on localhost. Where the healer gives up, Triton's liveness (its readiness held false
longer than a reload takes) restarts Triton's container.

The healer does not see Triton's processes (the pod shares no process namespace: Triton's command
line and environment hold the admin and storage keys). It sends each LLM stage a one-token request
of its own every 5 s (``tritonkit heal --probe-period``): NVIDIA's backend checks its engine on
requests only, so this is what shows a dead engine in an idle pod. A Python stage's dead stub
(Triton 2.51 keeps that model READY, see docs/known-issues.md) is seen the same way for the models
named with ``deploy aks --heal-probe-model`` (passed on as ``--probe-model``; that probe runs the
model's code with zeros, so it is the operator's choice). Its container probes ask its own
``/healthz``, which answers while its loop turns.
"""

from __future__ import annotations

from typing import Any

from tritonkit.deploy.aks import hardening as hard
from tritonkit.deploy.aks.options import GRPC_PORT, HEAL_PORT, HTTP_PORT, METRICS_PORT, AksOptions

__all__ = ["CONTAINER_NAME", "container"]

CONTAINER_NAME = "tritonkit-heal"
PORT_NAME = "heal"


def container(o: AksOptions) -> dict[str, Any]:
    """The healer's container (``o.healer_image`` is set)."""
    image = str(o.healer_image)
    args = [
        "heal",
        f"http://127.0.0.1:{HTTP_PORT}",
        "--metrics-url",
        f"http://127.0.0.1:{METRICS_PORT}/metrics",
        "--grpc",
        f"127.0.0.1:{GRPC_PORT}",
        "--port",
        str(HEAL_PORT),
    ]
    for model in o.heal_probe_models:
        args += ["--probe-model", model]
    command, admin_args, admin_mounts = hard.tritonkit_launch(o)
    health = {"httpGet": {"path": "/healthz", "port": PORT_NAME}, "timeoutSeconds": 3}
    return {
        "name": CONTAINER_NAME,
        "image": o.image_ref(image),
        "imagePullPolicy": o.pull_policy(image),
        "command": command,
        "args": args + admin_args,
        "env": [{"name": "HOME", "value": "/tmp"}],
        "ports": [{"name": PORT_NAME, "containerPort": HEAL_PORT, "protocol": "TCP"}],
        "readinessProbe": {**health, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**health, "periodSeconds": 10, "failureThreshold": 3},
        "resources": hard.guaranteed("100m", "256Mi"),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *admin_mounts],
        "securityContext": dict(hard.CONTAINER_SECURITY),
    }
