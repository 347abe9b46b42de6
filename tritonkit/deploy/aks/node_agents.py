"""The GPU-node agents tritonkit installs in kube-system: NVIDIA's device plugin and DCGM exporter.

Both depart from the hardening baseline where their job needs host access (root, a kubelet
hostPath, SYS_ADMIN for profiling metrics); each departure is stated on the object
(:func:`tritonkit.deploy.aks.hardening.stated_exceptions`). Everything else of the baseline holds:
requests and limits, probes, seccomp, no service-account token, a read-only root filesystem.
"""

from __future__ import annotations

from typing import Any

from tritonkit.deploy.aks.hardening import SECCOMP, stated_exceptions
from tritonkit.deploy.aks.options import DCGM_EXPORTER_IMAGE, DCGM_PORT, DEVICE_PLUGIN_IMAGE, AksOptions

DCGM_LABELS = {"app.kubernetes.io/name": "dcgm-exporter", "app.kubernetes.io/managed-by": "tritonkit"}


def gpu_node_daemonset(
    o: AksOptions,
    *,
    name: str,
    labels: dict[str, str],
    image: str,
    container_name: str,
    container: dict[str, Any],
    volumes: list[dict[str, Any]],
    host_access: str,
    exceptions: dict[str, str],
) -> dict[str, Any]:
    """A kube-system DaemonSet on the GPU nodes (system-node-critical, GPU taints tolerated).

    It runs one container of NVIDIA's ``image``, pinned and pulled as the options say (``container``
    holds the rest of it), with ``volumes``. The scheduling fields and the pod-level baseline every
    GPU-node agent shares (seccomp, no service-account token) are added here, the node selector
    when the options give one; ``host_access`` and ``exceptions`` state where the agent departs
    from the baseline.
    """
    pod: dict[str, Any] = {
        "priorityClassName": "system-node-critical",
        "tolerations": [
            {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": SECCOMP},
        "containers": [
            {
                "name": container_name,
                "image": o.image_ref(image),
                "imagePullPolicy": o.pull_policy(image),
                **container,
            }
        ],
        "volumes": volumes,
    }
    if o.gpu_node_selector is not None:
        pod["nodeSelector"] = {o.gpu_node_selector[0]: o.gpu_node_selector[1]}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "labels": labels,
            "annotations": stated_exceptions(host_access, exceptions),
        },
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": labels["app.kubernetes.io/name"]}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


POD_RESOURCES = "/var/lib/kubelet/pod-resources"
#: The exporter's host access, stated on the object (checkov reads the skip annotations).
_DCGM_EXCEPTIONS = {
    "CKV_K8S_23": "runs as root: DCGM's profiling (DCP) metrics and the kubelet pod-resources socket need it",
    "CKV_K8S_40": "runs as root (UID 0) for the NVIDIA driver's profiling interface",
    "CKV_K8S_37": "adds SYS_ADMIN, the one capability DCGM's profiling (DCP) metrics need",
    "CKV_K8S_25": "adds SYS_ADMIN (all others dropped): DCGM's profiling (DCP) metrics need it",
    "CKV_K8S_39": "SYS_ADMIN: DCGM's profiling (DCP) metrics read the GPU's performance counters",
}


def dcgm_exporter(o: AksOptions) -> dict[str, Any]:
    """NVIDIA's DCGM exporter on every GPU node, mapping each GPU to the pod that holds it.

    It reads the kubelet's pod-resources socket (DCGM_EXPORTER_KUBERNETES) so a GPU series carries
    the Triton pod's namespace/pod labels; the PodMonitor keeps them with honorLabels.
    """
    health = {"httpGet": {"path": "/health", "port": DCGM_PORT}, "timeoutSeconds": 5}
    container: dict[str, Any] = {
        "args": ["-f", "/etc/dcgm-exporter/dcp-metrics-included.csv"],
        "env": [
            {"name": "DCGM_EXPORTER_LISTEN", "value": f":{DCGM_PORT}"},
            {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
        ],
        "ports": [{"name": "metrics", "containerPort": DCGM_PORT, "protocol": "TCP"}],
        # Profiling (DCP) metrics need SYS_ADMIN; every other capability is dropped.
        "securityContext": {
            "runAsNonRoot": False,
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]},
            "seccompProfile": SECCOMP,
        },
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
        "readinessProbe": {**health, "periodSeconds": 10},
        "livenessProbe": {**health, "periodSeconds": 30, "initialDelaySeconds": 30},
        "volumeMounts": [
            {"name": "pod-resources", "mountPath": POD_RESOURCES, "readOnly": True},
            # The embedded host engine's scratch space (the root filesystem is read-only).
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return gpu_node_daemonset(
        o,
        name="dcgm-exporter",
        labels=DCGM_LABELS,
        image=DCGM_EXPORTER_IMAGE,
        container_name="dcgm-exporter",
        container=container,
        volumes=[
            {"name": "pod-resources", "hostPath": {"path": POD_RESOURCES}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        ],
        host_access="root with SYS_ADMIN and the hostPath /var/lib/kubelet/pod-resources (read-only): GPU "
        "profiling metrics, and each GPU mapped to the pod that holds it",
        exceptions=_DCGM_EXCEPTIONS,
    )


_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
#: The device plugin's host access, stated on the object (checkov reads the skip annotations).
_PLUGIN_EXCEPTIONS = {
    "CKV_K8S_23": "runs as root: it creates its socket in the kubelet's root-owned device-plugins hostPath",
    "CKV_K8S_40": "runs as root (UID 0): the kubelet's device-plugins directory is root-only",
}


def device_plugin(o: AksOptions) -> dict[str, Any]:
    """The NVIDIA device plugin: advertises nvidia.com/gpu on GPU nodes (a cluster prerequisite).

    It has no health endpoint: the probes check the socket it serves the kubelet on.
    """
    labels = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/managed-by": "tritonkit"}
    socket_probe = {
        "exec": {"command": ["test", "-S", f"{_PLUGIN_DIR}/nvidia-gpu.sock"]},
        "periodSeconds": 30,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }
    container: dict[str, Any] = {
        "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
        "securityContext": {
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": SECCOMP,
        },
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "100m", "memory": "128Mi"},
        },
        "readinessProbe": socket_probe,
        "livenessProbe": {**socket_probe, "initialDelaySeconds": 30},
        "volumeMounts": [{"name": "device-plugin", "mountPath": _PLUGIN_DIR}],
    }
    return gpu_node_daemonset(
        o,
        name="nvidia-device-plugin-daemonset",
        labels=labels,
        image=DEVICE_PLUGIN_IMAGE,
        container_name="nvidia-device-plugin-ctr",
        container=container,
        volumes=[{"name": "device-plugin", "hostPath": {"path": _PLUGIN_DIR, "type": "Directory"}}],
        host_access=f"root with the hostPath {_PLUGIN_DIR} (read-write): the kubelet's device-plugin "
        "registration",
        exceptions=_PLUGIN_EXCEPTIONS,
    )
