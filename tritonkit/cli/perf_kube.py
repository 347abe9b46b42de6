"""`tritonkit perf ... --kube N`: the run's load from N pods (parsing and wiring only).

The invoking command line becomes the coordinator pod's (less the options that only mean
something here: outputs, kube options, --workers); the objects come from
:mod:`tritonkit.deploy.aks.perf_job`, the cluster calls from :mod:`tritonkit.deploy.aks.perf_kube`,
and the collected result goes through the same views and files as a local run.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tritonkit.errors import PerfError
from tritonkit.perf import PerfSettings

if TYPE_CHECKING:
    from tritonkit.deploy.aks.perf_job import PerfJob

__all__ = ["KubeOptions", "coordinator_args", "dry_run", "run_on_cluster", "runs_elsewhere"]

Kube = Annotated[
    int | None,
    typer.Option(
        "--kube",
        metavar="N",
        help="Run the load from N worker pods of a Kubernetes Job (indexed) and one coordinator pod, "
        "merged exactly (every percentile over the union of raw records).",
    ),
]
DryRun = Annotated[
    Path | None,
    typer.Option("--dry-run", file_okay=False, help="--kube: write the manifests to this directory instead."),
]
Namespace = Annotated[str, typer.Option("--namespace", help="--kube: the namespace the Jobs run in.")]
Image = Annotated[
    str | None,
    typer.Option(
        "--image",
        help="--kube: an image with tritonkit installed (default: the one deploy aks runs its "
        "OpenAI front or healer from in --namespace).",
    ),
]
Context = Annotated[str | None, typer.Option("--context", help="--kube: kubeconfig context.")]
KubeSecret = Annotated[
    str | None,
    typer.Option(
        "--kube-secret",
        help="--kube: the Secret holding the --key-env / --restricted-header values, one key per "
        "env var name (mounted as files in the coordinator pod; never written into a manifest).",
    ),
]
KubeName = Annotated[
    str | None,
    typer.Option("--kube-name", help="--kube: the run's object names (default tritonkit-perf-XXXXXX)."),
]
Listen = Annotated[
    str | None,
    typer.Option(
        "--listen",
        hidden=True,
        help="HOST:PORT: wait for --workers N workers started elsewhere (a --kube coordinator pod).",
    ),
]

#: options that take a value and mean something only to the invoking perf
_LOCAL_VALUED = frozenset(
    {
        "--kube",
        "--dry-run",
        "--namespace",
        "--image",
        "--context",
        "--kube-secret",
        "--kube-name",
        "--workers",
        "--json",
        "--csv",
        "--plot",
        "--report",
        "--listen",
    }
)
_LOCAL_FLAGS = frozenset({"--quiet", "-q"})
#: options naming a file on this machine: a pod has no such file
_FILE_OPTIONS = frozenset({"--dataset", "--tokenizer", "--cacert", "--repository"})
#: credentials read from env vars: in the pod, from the Secret's files
_CREDENTIALS = frozenset({"--key-env", "--restricted-header"})
#: credentials fetched on this machine (Azure CLI, managed identity): not in a pod yet
_UNSUPPORTED = frozenset({"--aml-endpoint", "--entra-id"})


@dataclass(frozen=True)
class KubeOptions:
    workers: int
    namespace: str
    image: str | None
    context: str | None
    secret: str | None
    name: str | None
    dry_run: Path | None
    #: a kubernetes.client.ApiClient for the default image's lookup (None: from the kubeconfig)
    api_client: Any = None


def coordinator_args(argv: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The perf command line the coordinator pod runs, and the env vars holding credentials."""
    args: list[str] = []
    envs: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        name, eq, inline = item.partition("=")
        valued = (
            name in _LOCAL_VALUED or name in _FILE_OPTIONS or name in ("--key-env", "--restricted-header")
        )
        value = inline if eq else (items[i + 1] if valued and i + 1 < len(items) else "")
        step = 1 if eq or not valued else 2
        if name in _UNSUPPORTED:
            raise PerfError(f"{name} is not available with --kube", hint="use --key-env with --kube-secret")
        if name in _FILE_OPTIONS:
            raise PerfError(
                f"{name} names a file on this machine, which the coordinator pod does not have",
                hint="drop it for --kube (synthetic prompts, one response = one token), or bake the "
                "file into --image and run the worker image's tritonkit perf by hand",
            )
        if name == "--input-data" and value not in ("random", "zero"):
            raise PerfError("--input-data FILE is not available with --kube (the pod has no such file)")
        if name == "--key-env":
            envs.append(value)
        elif name == "--restricted-header":
            envs.append(value.partition("=")[2])
        if name not in _LOCAL_VALUED and name not in _LOCAL_FLAGS:
            args.extend(items[i : i + step])
        i += step
    return tuple(args), tuple(envs)


def _job(settings: PerfSettings, argv: Sequence[str], o: KubeOptions) -> PerfJob:
    from tritonkit.deploy.aks.perf_job import PerfJob

    if o.workers < 1:
        raise PerfError("--kube needs at least 1 worker pod")
    if settings.workers:
        raise PerfError("give --kube N or --workers N, not both (--kube's pods are its workers)")
    args, envs = coordinator_args(argv)
    if envs and not o.secret:
        raise PerfError(
            f"--kube sends credentials from a Secret, not from this shell: {', '.join(envs)}",
            hint="kubectl create secret generic NAME --from-literal=VAR=... and add --kube-secret NAME",
        )
    per_step = settings.warmup_s + settings.max_trials * settings.measurement_interval_ms / 1000 + 60
    deadline = int(900 + len(settings.levels) * (settings.duration_s or per_step) * 2)
    return PerfJob(
        name=o.name or f"tritonkit-perf-{secrets.token_hex(3)}",
        namespace=o.namespace,
        image=o.image or _deployed_image(o),
        workers=o.workers,
        perf_args=args,
        secret_env=tuple((env, str(o.secret), env) for env in envs),
        deadline_s=deadline,
    )


def _deployed_image(o: KubeOptions) -> str:
    """No --image: the one deploy aks already runs tritonkit from in the namespace (Triton's own
    image has no tritonkit)."""
    from tritonkit.deploy.aks.perf_kube import deployed_tritonkit_image
    from tritonkit.errors import KubernetesError

    try:
        return deployed_tritonkit_image(o.namespace, context=o.context, api_client=o.api_client)
    except KubernetesError as exc:
        raise PerfError(
            f"--kube without --image runs the image deploy aks runs tritonkit from, and found none: "
            f"{exc.message}",
            hint="name an image with tritonkit installed: --image REGISTRY/IMAGE@sha256:... "
            "(Triton's own image has no tritonkit)",
        ) from exc


def runs_elsewhere(options: dict[str, Any]) -> bool:
    """A --kube run (or its --dry-run) reads credentials in the coordinator pod, from the Secret:
    the invoking shell need not hold them."""
    return options.get("kube_workers") is not None or options.get("dry_run") is not None


def _checked(job: PerfJob) -> dict[str, list[dict[str, Any]]]:
    """The run's objects, each against Kubernetes' OpenAPI schema and the hardening baseline."""
    from tritonkit.deploy.aks.checks import workload_problems
    from tritonkit.deploy.aks.crd_schemas import builtin_problems
    from tritonkit.deploy.aks.perf_job import render_perf_job
    from tritonkit.errors import DeployValidationError

    files = render_perf_job(job)
    problems: list[str] = []
    for docs in files.values():
        for doc in docs:
            problems += builtin_problems(doc)
            if doc["kind"] == "Job":
                problems += workload_problems(doc, token_allowed=False)
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise DeployValidationError(
            f"the perf Job's objects fail their checks:\n{listing}", problems=problems
        )
    return files


def dry_run(settings: PerfSettings, argv: Sequence[str], o: KubeOptions) -> list[Path]:
    """Write the checked manifests into ``o.dry_run``; the files written."""
    from tritonkit._files import atomic_write_bytes
    from tritonkit.deploy.aks.render import dump_yaml

    if o.dry_run is None:
        raise PerfError("--dry-run needs a directory")
    files = _checked(_job(settings, argv, o))
    o.dry_run.mkdir(parents=True, exist_ok=True)
    header = "# Generated by `tritonkit perf --kube --dry-run`; secrets are referenced, never embedded.\n"
    written = []
    for name, docs in files.items():
        path = o.dry_run / name
        atomic_write_bytes(path, dump_yaml(docs, header=header).encode())
        written.append(path)
    return written


def run_on_cluster(settings: PerfSettings, argv: Sequence[str], o: KubeOptions) -> dict[str, Any]:
    """Apply, wait for the coordinator, collect its JSON result, delete the run's objects."""
    from tritonkit.deploy.aks.perf_job import objects
    from tritonkit.deploy.aks.perf_kube import KubePerfRun

    job = _job(settings, argv, o)
    files = _checked(job)
    run = KubePerfRun(job, context=o.context)
    run.apply(objects(files))
    try:
        return run.wait(timeout_s=float(job.deadline_s) + 120)
    finally:
        run.delete()
