"""The OpenAI front beside Triton on AKS (``deploy aks --openai-port P --openai-image IMAGE``).

A second container in Triton's pod runs ``tritonkit openai`` against Triton's gRPC port on
localhost, its streamed answers over Triton's HTTP port (no network hop, one rollout, scaled with
Triton), under the same hardening baseline as Triton's container (uid 10001, read-only root, no
capabilities, requests = limits). Its API keys
come from a Secret mounted as a file (``--openai-api-key-secret``, key ``keys``: one key a line),
never an environment variable. Its port joins the Service and the NetworkPolicy's serving rule;
its ``/metrics`` (on the same port) is scraped by the same ServiceMonitor as Triton's, and the
NetworkPolicy lets the scraper reach it. Readiness and startup probes ask ``/health/ready`` (the
front is ready when Triton and every model it serves are); liveness asks ``/health/live``, which
answers while the front's own event loop turns, so a restarting Triton never gets the front killed
too. The front runs one worker process per CPU its
container requests (``--openai-cpu``; ``--workers`` from the Downward API), so giving it more
cores gives it more workers.
"""

from __future__ import annotations

from typing import Any

from tritonkit.deploy.aks import hardening as hard
from tritonkit.deploy.aks.options import GRPC_PORT, HTTP_PORT, SECRETS_DIR, AksOptions

__all__ = [
    "CONTAINER_NAME",
    "KEYS_DIR",
    "PORT_NAME",
    "WORKERS_ENV",
    "container",
    "monitor_endpoint",
    "service_port",
    "volumes",
]

PORT_NAME = "openai"
CONTAINER_NAME = "openai-front"
KEYS_DIR = f"{SECRETS_DIR}/openai"
_KEYS_VOLUME = "openai-keys"
#: the front's worker count, from the container's CPU request (``resourceFieldRef``)
WORKERS_ENV = "TRITONKIT_OPENAI_WORKERS"


def container(o: AksOptions) -> dict[str, Any]:
    """The front's container (``o.openai_port`` and ``o.openai_image`` are set: option_problems)."""
    image = str(o.openai_image)
    args = ["openai", f"grpc://127.0.0.1:{GRPC_PORT}", "--host", "0.0.0.0", "--port", str(o.openai_port)]
    # Answers stream over Triton's HTTP generate_stream: 30-45% less of the front's CPU per token
    # than over gRPC (docs/openai.md); the rest (model list, images) over gRPC.
    args += ["--stream-url", f"http://127.0.0.1:{HTTP_PORT}"]
    # One worker per CPU the container requests: the Downward API gives the request rounded up to
    # whole cores, and Kubernetes expands $(VAR) in args from the container's env.
    args += ["--workers", f"$({WORKERS_ENV})"]
    mounts = [{"name": "tmp", "mountPath": "/tmp"}]  # HOME: the root filesystem is read-only
    if o.openai_api_key_secret is not None:
        args += ["--openai-api-key-file", f"{KEYS_DIR}/keys"]
        mounts.append(hard.secret_mount(_KEYS_VOLUME, KEYS_DIR))
    command, admin_args, admin_mounts = hard.tritonkit_launch(o)
    args += admin_args
    mounts += admin_mounts
    ready = {"path": "/health/ready", "port": PORT_NAME}
    return {
        "name": CONTAINER_NAME,
        "image": o.image_ref(image),
        "imagePullPolicy": o.pull_policy(image),
        "command": command,
        "args": args,
        "env": [
            {"name": "HOME", "value": "/tmp"},
            {
                "name": WORKERS_ENV,
                "valueFrom": {
                    "resourceFieldRef": {
                        "containerName": CONTAINER_NAME,
                        "resource": "requests.cpu",
                        "divisor": "1",
                    }
                },
            },
        ],
        "ports": [{"name": PORT_NAME, "containerPort": o.openai_port, "protocol": "TCP"}],
        # Triton loads its models first: the startup probe holds the others off as long as Triton's.
        "startupProbe": {"httpGet": ready, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 90},
        "readinessProbe": {"httpGet": ready, "periodSeconds": 5, "timeoutSeconds": 3, "failureThreshold": 3},
        # Its own event loop only: a Triton that is away makes the front not ready, never restarted
        # (it answers 503 and recovers by itself once Triton is back).
        "livenessProbe": {
            "httpGet": {"path": "/health/live", "port": PORT_NAME},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "resources": hard.guaranteed(o.openai_cpu, o.openai_memory),
        "volumeMounts": mounts,
        "securityContext": dict(hard.CONTAINER_SECURITY),
    }


def volumes(o: AksOptions) -> list[dict[str, Any]]:
    """The pod volumes the front adds (its keys' Secret; ``tmp`` is Triton's, shared)."""
    if o.openai_api_key_secret is None:
        return []
    return [hard.secret_volume(_KEYS_VOLUME, o.openai_api_key_secret)]


def service_port(o: AksOptions) -> dict[str, Any]:
    return {
        "name": PORT_NAME,
        "port": o.openai_port,
        "targetPort": PORT_NAME,
        "protocol": "TCP",
        "appProtocol": "http",
    }


def monitor_endpoint() -> dict[str, Any]:
    """The ServiceMonitor endpoint scraping the front's own metrics (requests, TTFT, tokens)."""
    return {"port": PORT_NAME, "path": "/metrics", "interval": "15s"}
