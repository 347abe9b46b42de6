"""Deploy a Triton model repository to AKS: plan (checks + rendered objects), server-side apply,
wait for the rollout, smoke-test.

Rendering lives in :mod:`tritonkit.deploy.aks.render` (plain objects) and
:mod:`tritonkit.deploy.aks.helm` (a chart of the same objects); this module only plans and talks to the
cluster through the official kubernetes client. Every object is checked against its schema before
it is written or applied (:mod:`tritonkit.deploy.aks.crd_schemas`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tritonkit._extras import require
from tritonkit.deploy.aks import crd_schemas
from tritonkit.deploy.aks import trtllm as aks_trtllm
from tritonkit.deploy.aks import vllm as aks_vllm
from tritonkit.deploy.aks.checks import hardening_problems
from tritonkit.deploy.aks.options import (
    DEFAULT_IMAGE,
    HTTP_PORT,
    AksOptions,
    ModelRepositoryUri,
    option_problems,
    parse_model_repository,
    unpinned_warning,
)
from tritonkit.deploy.aks.render import Rendered, allowed_groups, api_group, dump_json, dump_yaml, render
from tritonkit.deploy.base import Artifact, DeployPlan, DeployResult, DeployStatus, Progress, SmokeResult
from tritonkit.deploy.checks import (
    ModelSummary,
    ensembles,
    image_target_for,
    packed_env_problems,
    raise_if,
    recorded_image,
    validate_for_deploy,
)
from tritonkit.deploy.smoke import smoke_test
from tritonkit.errors import DeployValidationError, KubernetesError

logger = logging.getLogger(__name__)

FIELD_MANAGER = "tritonkit"


class AksDeployer:
    """Deploys a model repository to AKS (or any Kubernetes with NVIDIA GPUs)."""

    target = "aks"

    def __init__(self, *, options: AksOptions, api_client: Any | None = None) -> None:
        self._trtllm_note: str | None = None
        recorded = recorded_image(options.repository) if options.image == DEFAULT_IMAGE else None
        if recorded is not None:  # the spec's own image (`image:`), as `tritonkit build` recorded it
            options = dataclasses.replace(options, image=recorded)
        stages = aks_trtllm.find_trtllm_models(options.repository) if options.repository.is_dir() else None
        if stages is not None:
            image, self._trtllm_note = aks_trtllm.image_for(
                stages, options.image, default_image=DEFAULT_IMAGE
            )
            options = dataclasses.replace(options, image=image, trtllm=stages)
        self.options = options
        self._api_client = api_client

    # ------------------------------------------------------------------ plan

    def check(self) -> tuple[ModelRepositoryUri, list[ModelSummary]]:
        """Every offline check: options, names, labels, URI, then the repository validator.

        A repository with vLLM stages switches the default image to NVIDIA's vLLM image of their
        release and puts the repository at their serving root (see aks_vllm.py): ``self.options``
        is updated to what will be deployed.
        """
        o = self.options
        uri = parse_model_repository(o.model_repository)
        raise_if(option_problems(o), "the AKS deployment settings are not valid; nothing was applied")
        stages = aks_vllm.find_vllm_models(Path(o.repository)) if Path(o.repository).is_dir() else None
        if stages is not None:
            image = aks_vllm.vllm_image_for(o.image, DEFAULT_IMAGE, stages)
            raise_if(
                aks_vllm.image_problems(image, o.gpu_count, stages),
                "the deployment cannot run the repository's vLLM stages; nothing was applied",
            )
            o = self.options = dataclasses.replace(o, image=image, vllm=stages)
        if o.trtllm is not None:
            raise_if(
                aks_trtllm.deploy_problems(o.trtllm, image=o.image, gpu_count=o.gpu_count, vllm=o.vllm),
                "the TensorRT-LLM models cannot load in this deployment; nothing was applied",
            )
        models = validate_for_deploy(o.repository, target=image_target_for(o.image))
        names = {m.name for m in models}
        has = ", ".join(sorted(names))
        raise_if(
            [
                f"--heal-probe-model {name}: no such model in {o.repository} (it has {has})"
                for name in o.heal_probe_models
                if name not in names
            ],
            "the healer cannot probe a model the repository does not have; nothing was applied",
        )
        raise_if(
            packed_env_problems(o.repository, o.image),
            "the image cannot run the repository's packed Python environments; nothing was applied",
        )
        return uri, models

    @property
    def min_replicas(self) -> int:
        return self.options.effective_min_replicas

    def labels(self) -> dict[str, str]:
        return self.options.labels_all()

    def selector(self) -> dict[str, str]:
        return self.options.selector()

    def manifests(
        self, uri: ModelRepositoryUri, models: list[ModelSummary]
    ) -> dict[str, list[dict[str, Any]]]:
        """File name -> Kubernetes objects, in apply order."""
        return render(self.options, uri, models).manifests

    def rendered(self, uri: ModelRepositoryUri, models: list[ModelSummary]) -> Rendered:
        """Every object and file, each checked against its schema (a kind without one fails)."""
        out = render(self.options, uri, models)
        objects = out.objects()
        allowed = allowed_groups(self.options)
        stray = sorted({f"{d['apiVersion']} {d['kind']}" for d in objects if api_group(d) not in allowed})
        raise_if(
            [
                f"{s} belongs to an API group --monitoring {self.options.monitoring} does not have"
                for s in stray
            ],
            "tritonkit rendered an object the chosen targets cannot serve",
        )
        crd_schemas.check_objects(objects)
        raise_if(
            hardening_problems(objects, self.options),
            "a rendered object misses tritonkit's hardening baseline (docs/deploy.md, Hardening)",
        )
        for path, doc in out.files.items():
            if path.endswith("prometheus-rule-groups.json"):
                raise_if(crd_schemas.rule_groups_problems(doc), f"{path} does not match its schema")
        return out

    def plan(self) -> DeployPlan:
        uri, models = self.check()
        out = self.rendered(uri, models)
        o = self.options
        artifacts: tuple[Artifact, ...]
        if o.output_format == "helm":
            from tritonkit.deploy.aks.helm import render_chart

            artifacts = tuple(Artifact(filename=f, text=t) for f, t in render_chart(o, uri, models).items())
        else:
            artifacts = tuple(
                Artifact(filename=fname, text=dump_yaml(docs), description=", ".join(d["kind"] for d in docs))
                for fname, docs in out.manifests.items()
            ) + tuple(Artifact(filename=path, text=dump_json(doc)) for path, doc in out.files.items())
        return DeployPlan(
            target=self.target,
            repository=Path(o.repository),
            artifacts=artifacts,
            summary=self._summary(uri, models, out),
            warnings=tuple(self._warnings(uri, models, out)),
        )

    def _summary(
        self, uri: ModelRepositoryUri, models: list[ModelSummary], out: Rendered
    ) -> tuple[tuple[str, str], ...]:
        o = self.options
        autoscaling = {"keda": "KEDA on queue time per request", "none": "none"}.get(
            o.autoscaler, f"HPA on {'queue time' if o.hpa_metric == 'queue' else 'CPU'}"
        )
        rows = [
            ("namespace", o.namespace),
            ("deployment", o.name),
            ("image", o.image_ref(o.image)),
            ("model repository", uri.triton_path if uri.scheme == "as" else o.model_repository),
            ("replicas", str(o.replicas)),
            ("gpus per pod", str(o.gpu_count)),
            ("monitoring", o.monitoring),
            ("autoscaling", autoscaling),
            ("models", ", ".join(m.name for m in models)),
        ]
        if out.decoupled:
            rows.append(("streaming (decoupled)", ", ".join(out.decoupled)))
        if o.vllm is not None:
            rows.append(("vLLM stages", f"{', '.join(o.vllm.models)} (repository at {o.vllm.serving_root})"))
        return tuple(rows)

    def _warnings(self, uri: ModelRepositoryUri, models: list[ModelSummary], out: Rendered) -> list[str]:
        o = self.options
        warnings: list[str] = []
        unpinned = unpinned_warning(o)
        if unpinned is not None:
            warnings.append(unpinned)
        if self._trtllm_note:
            warnings.append(self._trtllm_note)
        # The tensorrtllm backend runs on GPUs from a KIND_CPU instance (NVIDIA's layout).
        if o.gpu_count > 0 and o.trtllm is None and not any(m.uses_gpu for m in models):
            warnings.append("the pods request GPUs but no model has a KIND_GPU/KIND_AUTO instance group")
        if uri.scheme == "as" and o.workload_identity_client_id is not None:
            warnings.append(
                "workload identity needs the identity to hold 'Storage Blob Data Reader' on the container"
            )
        if out.decoupled:
            warnings.append(
                f"decoupled (streaming) models {', '.join(out.decoupled)}: call them over gRPC streaming or "
                "POST /v2/models/NAME/generate_stream (HTTP /infer answers 501); Triton drains for "
                f"--max-stream-seconds {o.max_stream_seconds} on shutdown; a gRPC client keeps one HTTP/2 "
                "connection, so kube-proxy balances clients, not streams"
            )
        if o.vllm is not None and not o.vllm.metrics and o.autoscaler == "keda":
            warnings.append(
                f"vLLM stages {', '.join(o.vllm.models)} export no vllm:* metrics: set parameters "
                "{REPORT_CUSTOM_METRICS: true} on them to scale on the requests waiting in the engine"
            )
        if o.monitoring == "azure-managed-prometheus":
            warnings.append(
                "managed Prometheus: deploy azure/prometheus-rule-groups.json with `az deployment group "
                "create` (rule groups are Azure resources, not cluster objects)"
            )
        return warnings

    # ------------------------------------------------------------------ apply

    def _client(self) -> Any:
        if self._api_client is not None:
            return self._api_client
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        try:
            configuration = k8s.client.Configuration()
            k8s.config.load_kube_config(context=self.options.context, client_configuration=configuration)
        except (k8s.config.ConfigException, OSError, TypeError) as exc:
            raise KubernetesError(
                f"no Kubernetes cluster configured: {exc}",
                hint="get credentials first (az aks get-credentials -g GROUP -n CLUSTER), or use --dry-run",
            ) from exc
        configuration.retries = 2
        self._api_client = k8s.client.ApiClient(configuration)
        return self._api_client

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one Kubernetes call, mapping its errors to KubernetesError."""
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        import urllib3.exceptions

        missing_api_hint = kwargs.pop("_missing_api_hint", None) or (
            "check the cluster's Kubernetes version and the add-ons the chosen --monitoring/--autoscaler need"
        )
        if kwargs.pop("_timeout", True):
            kwargs.setdefault("_request_timeout", (10.0, self.options.request_timeout_s))
        try:
            return fn(*args, **kwargs)
        except k8s.dynamic.exceptions.ResourceNotFoundError as exc:
            raise KubernetesError(
                f"{what} failed: the cluster does not serve this API ({exc})", hint=missing_api_hint
            ) from exc
        except k8s.client.exceptions.ApiException as exc:
            reason = _api_reason(exc)
            hint = None
            if exc.status in (401, 403):
                hint = "your kubeconfig identity lacks the rights for this; check `kubectl auth can-i`"
            elif exc.status == 404 and "the server could not find the requested resource" in reason.lower():
                hint = missing_api_hint
            raise KubernetesError(f"{what} failed: HTTP {exc.status} {reason}", hint=hint) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubernetesError(
                f"{what} failed: the Kubernetes API server is not reachable ({type(exc).__name__}: {exc})",
                hint="check the cluster is running and your kubeconfig context (kubectl cluster-info)",
            ) from exc

    def apply(self, plan: DeployPlan, *, progress: Progress | None = None) -> DeployResult:
        say = progress or (lambda _msg: None)
        if self.options.output_format == "helm":
            raise DeployValidationError(
                "--format helm writes a chart and applies nothing",
                hint="use it with --dry-run, then `helm install NAME DIR`; or deploy without --format helm",
            )
        uri, models = self.check()
        rendered = self.rendered(uri, models)
        client = self._client()
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        dyn = self._call("discovering the cluster's APIs", k8s.dynamic.DynamicClient, client, _timeout=False)
        for fname, docs in rendered.manifests.items():
            for doc in docs:
                kind, name = doc["kind"], doc["metadata"]["name"]
                resource = self._call(
                    f"looking up {doc['apiVersion']}/{kind}",
                    _resource,
                    dyn,
                    doc,
                    _timeout=False,
                    _missing_api_hint=_missing_api_hint(api_group(doc)),
                )
                self._call(
                    f"applying {kind} {name} ({fname})",
                    dyn.server_side_apply,
                    resource,
                    body=doc,
                    name=name,
                    namespace=doc["metadata"].get("namespace"),
                    field_manager=FIELD_MANAGER,
                    force_conflicts=True,
                )
                say(f"applied {kind} {name}")
        self.wait_for_rollout(progress=say)
        # A decoupled model answers HTTP /infer with 501: the smoke test calls only unary ones.
        unary = [m for m in models if not m.decoupled]
        smoke_models = ensembles(unary) or [m.name for m in unary]
        if len(unary) < len(models):
            say(f"smoke test skips the streaming models {', '.join(rendered.decoupled)} (readiness only)")
        url = self.options.smoke_url or self._service_url()
        smoke: tuple[SmokeResult, ...] = ()
        if not self.options.smoke_test:
            pass
        elif url is not None:
            smoke = tuple(smoke_test(url, models=smoke_models))
        else:
            pod = self._ready_pod()
            say(f"smoke test through a port-forward to pod {pod}")
            with self._port_forward(pod) as local_url:
                smoke = tuple(smoke_test(local_url, models=smoke_models))
        status = self.status()
        return DeployResult(target=self.target, scoring_uri=url, summary=status.details, smoke=smoke)

    def _ready_pod(self) -> str:
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        core = k8s.client.CoreV1Api(self._client())
        selector = ",".join(f"{k}={v}" for k, v in self.selector().items())
        pods = self._call(
            "listing pods", core.list_namespaced_pod, self.options.namespace, label_selector=selector
        )
        for pod in pods.items:
            if any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or [])):
                return str(pod.metadata.name)
        raise KubernetesError(f"no ready Triton pod in namespace {self.options.namespace} to smoke-test")

    @contextlib.contextmanager
    def _port_forward(self, pod: str) -> Iterator[str]:
        """A local 127.0.0.1 port relayed to the pod's HTTP port (like kubectl port-forward)."""
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        from kubernetes.stream import portforward

        core = k8s.client.CoreV1Api(self._client())
        namespace = self.options.namespace
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.settimeout(0.5)
        stop = threading.Event()

        def pump(src: Any, dst: Any) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for sock in (src, dst):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

        def serve() -> None:
            while not stop.is_set():
                try:
                    conn, _addr = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                try:
                    forward = portforward(
                        core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(HTTP_PORT)
                    )
                    remote = forward.socket(HTTP_PORT)
                except Exception as exc:  # noqa: BLE001 - one failed connection must not end the relay
                    logger.warning("port-forward to %s/%s failed: %s", namespace, pod, exc)
                    conn.close()
                    continue
                for a, b in ((conn, remote), (remote, conn)):
                    threading.Thread(target=pump, args=(a, b), daemon=True).start()

        thread = threading.Thread(target=serve, name="tritonkit-port-forward", daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            stop.set()
            listener.close()
            thread.join(timeout=2)

    def _service_url(self) -> str | None:
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        core = k8s.client.CoreV1Api(self._client())
        svc = self._call(
            "reading the Service", core.read_namespaced_service, self.options.name, self.options.namespace
        )
        ingress = (svc.status.load_balancer.ingress or []) if svc.status and svc.status.load_balancer else []
        for entry in ingress:
            host = entry.ip or entry.hostname
            if host:
                return f"http://{host}:{HTTP_PORT}"
        return None

    def wait_for_rollout(self, *, progress: Progress | None = None) -> None:
        """Poll the Deployment until every replica is updated and available, or time out."""
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        apps = k8s.client.AppsV1Api(self._client())
        o = self.options
        deadline = time.monotonic() + o.rollout_timeout_s
        while True:
            dep = self._call(
                "reading the Deployment", apps.read_namespaced_deployment_status, o.name, o.namespace
            )
            st, want = dep.status, dep.spec.replicas or 0
            done = (
                (st.observed_generation or 0) >= (dep.metadata.generation or 0)
                and (st.updated_replicas or 0) >= want
                and (st.available_replicas or 0) >= want
                and (st.replicas or 0) == want
            )
            if done:
                return
            if progress is not None:
                progress(f"waiting for rollout: {st.available_replicas or 0}/{want} replicas available")
            if time.monotonic() >= deadline:
                raise KubernetesError(
                    f"Deployment {o.namespace}/{o.name} was not ready after {o.rollout_timeout_s:.0f}s "
                    f"({st.available_replicas or 0}/{want} replicas available)",
                    hint=f"kubectl -n {o.namespace} describe pods -l app.kubernetes.io/instance={o.name} "
                    "(Pending: GPU quota, node selector or toleration; CrashLoop: kubectl logs)",
                )
            time.sleep(5)

    def status(self) -> DeployStatus:
        k8s = require("kubernetes", feature="tritonkit deploy --target aks")
        core = k8s.client.CoreV1Api(self._client())
        o = self.options
        selector = ",".join(f"{k}={v}" for k, v in self.selector().items())
        pods = self._call("listing pods", core.list_namespaced_pod, o.namespace, label_selector=selector)
        details: list[tuple[str, str]] = []
        ready_count = 0
        for pod in pods.items:
            conditions = {c.type: c.status for c in (pod.status.conditions or [])}
            ready = conditions.get("Ready") == "True"
            ready_count += ready
            details.append((pod.metadata.name, f"{pod.status.phase}, {'ready' if ready else 'not ready'}"))
        want = o.replicas if o.autoscaler == "none" else o.effective_min_replicas
        return DeployStatus(target=self.target, ready=ready_count >= want, details=tuple(details))


def _missing_api_hint(group: str) -> str:
    """What installs an API group tritonkit renders objects of."""
    return {
        "azmonitoring.coreos.com": "enable Azure Monitor managed Prometheus on the cluster "
        "(az aks update --enable-azure-monitor-metrics ...), or choose --monitoring prometheus-operator",
        "monitoring.coreos.com": "install the Prometheus Operator CRDs (kube-prometheus-stack), or choose "
        "--monitoring azure-managed-prometheus",
        "keda.sh": "enable the KEDA add-on (az aks update --enable-keda ...), or choose --autoscaler "
        "hpa|none",
    }.get(group, "check the cluster's Kubernetes version")


def _resource(dyn: Any, doc: dict[str, Any]) -> Any:
    return dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])


def _api_reason(exc: Any) -> str:
    import json

    try:
        body = json.loads(exc.body)
        return str(body.get("message") or exc.reason)
    except (TypeError, ValueError):
        return str(exc.reason)
