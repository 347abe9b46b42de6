"""Apply, watch and collect a ``perf --kube`` run through the official ``kubernetes`` client.

The one module that calls the cluster for it: create the objects of
:mod:`tritonkit.deploy.aks.perf_job`, poll the coordinator Job until it ends (with a deadline),
read the coordinator pod's log and return the JSON result printed after
:data:`~tritonkit.deploy.aks.perf_job.RESULT_MARKER`, then delete the Jobs (their pods go with
them). A failed run's error carries the coordinator's log tail and each failed worker's.
:func:`deployed_tritonkit_image` finds the image ``deploy aks`` already runs tritonkit from (the
OpenAI front's or the healer's), the default for ``--image``.
The client's errors become :class:`~tritonkit.errors.KubernetesError` here, once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tritonkit._extras import require
from tritonkit.deploy.aks import healer, openai_front
from tritonkit.deploy.aks.perf_job import RESULT_MARKER, PerfJob
from tritonkit.errors import KubernetesError

__all__ = ["KubePerfRun", "deployed_tritonkit_image", "result_from_log"]

_POLL_S = 5.0
_log = logging.getLogger(__name__)
_FEATURE = "tritonkit perf --kube"
#: the Deployments `deploy aks` writes (AksOptions.labels_all), and its containers that run tritonkit
_DEPLOYED_SELECTOR = "app.kubernetes.io/name=triton,app.kubernetes.io/managed-by=tritonkit"
_TRITONKIT_CONTAINERS = frozenset({openai_front.CONTAINER_NAME, healer.CONTAINER_NAME})


def result_from_log(log: str, *, where: str) -> dict[str, Any]:
    """The JSON result the coordinator printed after the marker line."""
    head, marker, body = log.partition(RESULT_MARKER)
    if not marker:
        raise KubernetesError(
            f"{where} ended without a result in its log", hint=f"its log ends:\n{head[-2000:]}"
        )
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise KubernetesError(f"{where} printed a result that is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise KubernetesError(f"{where} printed a result that is not a JSON object")
    return data


def _api_client(context: str | None) -> Any:
    """A ``kubernetes.client.ApiClient`` from the kubeconfig, ``context`` chosen as
    ``deploy aks --context`` does."""
    k8s = require("kubernetes", feature=_FEATURE)
    try:
        configuration = k8s.client.Configuration()
        k8s.config.load_kube_config(context=context, client_configuration=configuration)
    except (k8s.config.ConfigException, OSError, TypeError) as exc:
        raise KubernetesError(
            f"no Kubernetes cluster configured: {exc}",
            hint="get credentials first (az aks get-credentials -g GROUP -n CLUSTER), or use --dry-run DIR",
        ) from exc
    return k8s.client.ApiClient(configuration)


def _call(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with a timeout; the client's errors as KubernetesError."""
    k8s = require("kubernetes", feature=_FEATURE)
    kwargs.setdefault("_request_timeout", (10.0, 60.0))
    try:
        return fn(*args, **kwargs)
    except k8s.client.exceptions.ApiException as exc:
        raise KubernetesError(
            f"{what} failed ({exc.status} {exc.reason})",
            hint="check --namespace and that your credentials may create Jobs, Services, "
            "ServiceAccounts and NetworkPolicies there",
        ) from exc
    except OSError as exc:
        raise KubernetesError(f"{what} failed: cannot reach the cluster ({exc})") from exc


def deployed_tritonkit_image(namespace: str, *, context: str | None = None, api_client: Any = None) -> str:
    """The image ``deploy aks`` runs tritonkit from in ``namespace``: its OpenAI front's or its
    healer's container, as the Deployment names it (digest pin included). KubernetesError when
    there is none, or when two deployments run different ones (the run would measure with one of
    them by chance)."""
    k8s = require("kubernetes", feature=_FEATURE)
    apps = k8s.client.AppsV1Api(api_client if api_client is not None else _api_client(context))
    found = _call(
        f"listing tritonkit's Deployments in namespace {namespace}",
        apps.list_namespaced_deployment,
        namespace,
        label_selector=_DEPLOYED_SELECTOR,
    )
    images: dict[str, list[str]] = {}
    for deployment in found.items:
        for c in deployment.spec.template.spec.containers or []:
            if c.name in _TRITONKIT_CONTAINERS and c.image:
                images.setdefault(c.image, []).append(f"{deployment.metadata.name}/{c.name}")
    if not images:
        raise KubernetesError(
            f"namespace {namespace} has no Deployment of `deploy aks` that runs tritonkit "
            "(an OpenAI front or a healer)",
            hint="--namespace where `deploy aks --openai-image` deployed",
        )
    if len(images) > 1:
        listing = "; ".join(f"{image} ({', '.join(where)})" for image, where in sorted(images.items()))
        raise KubernetesError(
            f"the tritonkit containers in namespace {namespace} run different images: {listing}",
            hint="choose one with --image",
        )
    return next(iter(images))


class KubePerfRun:
    """One run's objects in a cluster. ``api_client``: a ``kubernetes.client.ApiClient`` (default:
    from the kubeconfig, ``context`` chosen as ``deploy aks --context`` does)."""

    def __init__(self, job: PerfJob, *, context: str | None = None, api_client: Any = None) -> None:
        self.job = job
        self.context = context
        self._api_client = api_client

    def _client(self) -> Any:
        if self._api_client is None:
            self._api_client = _api_client(self.context)
        return self._api_client

    def apply(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Create every object, in order (a run is new each time: names clash if one is left)."""
        k8s = require("kubernetes", feature=_FEATURE)
        api = self._client()
        create = {
            "ServiceAccount": k8s.client.CoreV1Api(api).create_namespaced_service_account,
            "Service": k8s.client.CoreV1Api(api).create_namespaced_service,
            "NetworkPolicy": k8s.client.NetworkingV1Api(api).create_namespaced_network_policy,
            "Job": k8s.client.BatchV1Api(api).create_namespaced_job,
        }
        for doc in objects:
            kind, name = doc["kind"], doc["metadata"]["name"]
            _call(f"creating {kind} {self.job.namespace}/{name}", create[kind], self.job.namespace, dict(doc))

    def wait(self, *, timeout_s: float, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Poll the coordinator Job until it ends; its JSON result, or an error with the logs."""
        k8s = require("kubernetes", feature=_FEATURE)
        batch = k8s.client.BatchV1Api(self._client())
        name = f"{self.job.name}-coordinator"
        deadline = time.monotonic() + timeout_s
        while True:
            status = _call(
                "reading the coordinator Job", batch.read_namespaced_job_status, name, self.job.namespace
            ).status
            if status.succeeded:
                return result_from_log(self._log("coordinator"), where=f"Job {self.job.namespace}/{name}")
            if status.failed:
                raise KubernetesError(
                    f"the perf coordinator Job {self.job.namespace}/{name} failed",
                    hint=self._failure_logs(),
                )
            if time.monotonic() > deadline:
                raise KubernetesError(
                    f"the perf coordinator Job {self.job.namespace}/{name} did not end "
                    f"within {timeout_s:.0f}s",
                    hint=f"kubectl -n {self.job.namespace} describe pods -l "
                    f"app.kubernetes.io/instance={self.job.name} (Pending: quota, image pull)",
                )
            if progress is not None:
                progress(f"perf coordinator running ({status.active or 0} active)")
            time.sleep(_POLL_S)

    def _pods(self, role: str) -> list[Any]:
        k8s = require("kubernetes", feature=_FEATURE)
        core = k8s.client.CoreV1Api(self._client())
        selector = f"app.kubernetes.io/instance={self.job.name},app.kubernetes.io/component={role}"
        pods = _call(
            "listing the run's pods", core.list_namespaced_pod, self.job.namespace, label_selector=selector
        )
        return list(pods.items)

    def _log(self, role: str, pod: Any = None) -> str:
        k8s = require("kubernetes", feature=_FEATURE)
        core = k8s.client.CoreV1Api(self._client())
        pods = [pod] if pod is not None else self._pods(role)
        if not pods:
            return ""
        name = pods[0].metadata.name
        return str(
            _call(f"reading the log of pod {name}", core.read_namespaced_pod_log, name, self.job.namespace)
        )

    def _failure_logs(self) -> str:
        parts = [f"coordinator log (tail):\n{self._log('coordinator')[-3000:]}"]
        for pod in self._pods("worker"):
            if (pod.status.phase or "") == "Failed":
                parts.append(
                    f"worker pod {pod.metadata.name} failed; its log (tail):\n"
                    + self._log("worker", pod)[-1500:]
                )
        return "\n".join(parts)

    def delete(self) -> None:
        """Delete the run's objects (the Jobs' pods with them); errors here are not the run's."""
        k8s = require("kubernetes", feature=_FEATURE)
        api = self._client()
        ns, name = self.job.namespace, self.job.name
        body = k8s.client.V1DeleteOptions(propagation_policy="Background")
        calls = [
            (k8s.client.BatchV1Api(api).delete_namespaced_job, f"{name}-workers", body),
            (k8s.client.BatchV1Api(api).delete_namespaced_job, f"{name}-coordinator", body),
            (k8s.client.CoreV1Api(api).delete_namespaced_service, f"{name}-coordinator", None),
            (k8s.client.NetworkingV1Api(api).delete_namespaced_network_policy, f"{name}-coordinator", None),
            (k8s.client.NetworkingV1Api(api).delete_namespaced_network_policy, f"{name}-workers", None),
            (k8s.client.CoreV1Api(api).delete_namespaced_service_account, name, None),
        ]
        for fn, obj, options in calls:
            try:
                if options is not None:
                    _call(f"deleting {obj}", fn, obj, ns, body=options)
                else:
                    _call(f"deleting {obj}", fn, obj, ns)
            except Exception as exc:  # noqa: BLE001 - already gone, or an answer the client cannot
                # read: the run's result stands; what was left is logged for the user to clean up
                _log.warning("could not delete %s/%s: %s", ns, obj, exc)
