"""Offline checks shared by the Azure ML and AKS deployers: names, repository, request sizing.

Everything here runs before any network call, so a deployment that Azure or Kubernetes would
reject after an upload or a half-finished rollout is refused up front, with the rule it broke.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.errors import DeployValidationError
from tritonkit.kinds import kind_for
from tritonkit.kinds.releases import TARGETS
from tritonkit.repository.image_packages import ImageTarget, release_target, stock_image_target

log = logging.getLogger(__name__)

#: The validator's code for a Python model importing what the serving image lacks.
_IMPORT_CODE = "python-import-unavailable"

# Azure ML online endpoint / deployment names: 3-32 characters, a letter first, then letters,
# digits and hyphens; an endpoint name must not end with a hyphen (the service refuses it).
_AML_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{2,31}$")
# Kubernetes: RFC 1035 label names (Service, Namespace...), label values and keys.
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_KEY_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def aml_name_problems(kind: str, name: str) -> list[str]:
    """Problems with an Azure ML endpoint or deployment name (``kind`` is "endpoint"/"deployment")."""
    problems: list[str] = []
    if not _AML_NAME.match(name):
        problems.append(
            f"{kind} name {name!r} is not valid: Azure ML wants 3-32 characters, a letter first, "
            "then only letters, digits and hyphens"
        )
    if kind == "endpoint" and name.endswith("-"):
        problems.append(f"endpoint name {name!r} ends with a hyphen, which Azure ML refuses")
    return problems


def k8s_name_problems(kind: str, name: str, *, max_len: int = 63) -> list[str]:
    """Problems with a Kubernetes object name that must be an RFC 1035 label (Service, Namespace)."""
    if len(name) > max_len or not _DNS1035_LABEL.match(name):
        return [
            f"{kind} name {name!r} is not valid: Kubernetes wants at most {max_len} lowercase letters, "
            "digits and hyphens, starting with a letter and ending with a letter or digit"
        ]
    return []


def k8s_label_problems(labels: dict[str, str]) -> list[str]:
    """Problems with Kubernetes label keys ([prefix/]name) and values."""
    problems: list[str] = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
            problems.append(f"label key {key!r}: prefix must be a DNS subdomain of at most 253 characters")
        if len(name) > 63 or not _LABEL_KEY_NAME.match(name):
            problems.append(
                f"label key {key!r}: name must be at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit"
            )
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            problems.append(
                f"label {key}={value!r}: value must be at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit"
            )
    return problems


def raise_if(problems: Sequence[str], what: str, *, hint: str | None = None) -> None:
    """Raise one DeployValidationError listing every problem, or return when there are none."""
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise DeployValidationError(f"{what}:\n{listing}", problems=problems, hint=hint)


# --------------------------------------------------------------------------- repository


@dataclass(frozen=True)
class ModelSummary:
    """What deployment sizing and smoke tests need to know about one model of the repository."""

    name: str
    is_ensemble: bool
    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...]
    instance_count: int
    uses_gpu: bool
    #: Decoupled (streaming) model: served over gRPC streams and generate_stream, never HTTP /infer.
    decoupled: bool = False
    #: for a decoupled ensemble: the step model that makes it so
    decoupled_via: str = ""
    #: the config's backend (an LLM engine stage's names its kind)
    backend: str = ""


#: Azure ML's no-code Triton deployments run Azure ML's own tritonserver image: a stock one,
#: of a release tritonkit cannot know offline.
AML_TRITON_IMAGE = stock_image_target("Azure ML's Triton image (no-code `triton_model` deployment)")


def image_target_for(image: str) -> ImageTarget | None:
    """The validator's target for a deployment running ``image``.

    An NGC tritonserver tag of a release in the table is that release; another NGC tritonserver
    tag is a stock image of an unknown release (numpy and the backend utils, nothing else); any
    other image is custom: None, so the release ``tritonkit build`` recorded decides (and with
    none recorded, imports the image may provide are warnings).
    """
    release = py3_release(image)
    if release is None:
        return None
    if release in TARGETS:
        return release_target(release)
    return stock_image_target(f"the stock image {image}")


def recorded_image(repository: Path) -> str | None:
    """The custom image (spec key ``image:``) ``tritonkit build`` recorded for the repository:
    what ``deploy`` runs when ``--image`` is not given. DeployValidationError when its specs name
    different images (one container serves the whole repository)."""
    from tritonkit.errors import RepositoryError
    from tritonkit.repository.manifest import Manifest

    try:
        images = Manifest.load(Path(repository)).images() if Path(repository).is_dir() else []
    except RepositoryError:
        return None
    if len(images) > 1:
        raise DeployValidationError(
            f"the repository's specs were built for different images ({', '.join(images)})",
            hint="one tritonserver container serves a repository: build its specs for one image, "
            "or pass --image",
        )
    return images[0] if images else None


def custom_image_problems(repository: Path) -> list[str]:
    """Azure ML's no-code Triton deployment runs its own image, never a custom one."""
    image = recorded_image(repository)
    if image is None:
        return []
    return [
        f"{repository} was built for the custom image {image} (spec key `image:`), and Azure ML's "
        "no-code Triton deployment runs Azure ML's own image: its Python models would not find "
        "their packages. Deploy with `tritonkit deploy aks` (it runs the recorded image)."
    ]


def validate_for_deploy(repository: Path, *, target: ImageTarget | None = None) -> list[ModelSummary]:
    """Run tritonkit's static validator on ``repository`` and summarise its models.

    ``target``: the image the deployment runs (see :func:`image_target_for`); None leaves it to
    what ``tritonkit build`` recorded. Raises DeployValidationError listing the validator's
    errors: a repository Triton would refuse is never uploaded.
    """
    from tritonkit.repository import scan_repository, validate_repository

    repository = Path(repository)
    if not repository.is_dir():
        raise DeployValidationError(
            f"model repository {repository} does not exist or is not a directory",
            hint="build one first with `tritonkit build SPEC -o DIR`",
        )
    report = validate_repository(repository, target=target)
    for problem in report.warnings:
        if problem.code == _IMPORT_CODE:  # the image may provide it: said, not refused
            log.warning("%s", _format_problem(problem))
    if not report.valid:
        errors = [
            p for p in report.problems if str(getattr(p, "severity", "error")).lower().endswith("error")
        ]
        lines = [_format_problem(p) for p in (errors or list(report.problems))]
        hint = f"run `tritonkit validate {repository}` and fix what it reports"
        if any(getattr(p, "code", "") == _IMPORT_CODE for p in errors):
            # The image would refuse these models at load time, after the upload and rollout.
            hint = (
                "declare the missing packages in the pipeline spec (`requirements:` on the Python "
                "model, and `target:` for the image's release), rebuild with `tritonkit build` so they "
                f"are packed into the repository, then deploy again; {hint}"
            )
        what = f"the model repository {repository} failed validation; nothing was deployed"
        raise_if(lines, what, hint=hint)
    scanned = scan_repository(repository)
    streaming = decoupled_models(scanned)
    models = [
        summarise_model(m, decoupled=m.name in streaming, via=_first_streaming_step(m, streaming))
        for m in scanned
    ]
    if not models:
        raise DeployValidationError(
            f"model repository {repository} holds no models",
            hint="a Triton repository has one directory per model with a config.pbtxt in it",
        )
    return models


# nvcr.io/nvidia/tritonserver:<release>-<flavour>: py3 (and its -py3-min / -py3-sdk style
# siblings), vllm-python-py3, trtllm-python-py3...
_NGC_TAG = re.compile(r"(?:^|/)tritonserver:(?P<release>\d{2}\.\d{2})-(?P<flavour>[A-Za-z0-9_.-]+)$")
_PY3_FLAVOUR = re.compile(r"py3(?:-[A-Za-z0-9_.-]+)?")


def ngc_tag(image: str) -> tuple[str, str] | None:
    """(release, flavour) of an NGC tritonserver image tag ("24.10", "py3"); None for another image."""
    match = _NGC_TAG.search(image)
    return (match["release"], match["flavour"]) if match else None


def py3_release(image: str) -> str | None:
    """The release of an NGC tritonserver py3 image (or a -py3-* sibling); None for another image."""
    tag = ngc_tag(image)
    return tag[0] if tag is not None and _PY3_FLAVOUR.fullmatch(tag[1]) else None


def packed_env_problems(repository: Path, image: str) -> list[str]:
    """Packed Python environments (``tritonkit build``'s ``EXECUTION_ENV_PATH`` archives) made for
    another Python than the one ``image`` runs.

    The Python backend's stub embeds the image's libpython, so an archive packed for 3.10 fails to
    import its compiled wheels under 3.12 at load time, after the rollout. Only NGC tritonserver
    tags tritonkit knows are judged (a custom image's Python cannot be known offline).
    """
    from tritonkit.repository import execution_env, scan_repository

    release = py3_release(image)
    target = TARGETS.get(release) if release is not None else None
    if target is None:
        return []
    problems: list[str] = []
    for model in scan_repository(repository):
        if execution_env.ENV_PARAMETER not in model.config.parameters:
            continue
        archive = execution_env.resolve_env_path(
            model.config.parameters[execution_env.ENV_PARAMETER].string_value, model.path
        )
        meta = execution_env.read_metadata(archive) if archive is not None and archive.is_file() else None
        if meta is None or str(meta.get("python")) == target.python:
            continue
        problems.append(
            f"model '{model.name}': its packed environment {archive.name if archive else ''} is for "
            f"Python {meta.get('python')} (target {meta.get('release')}), but {image} runs "
            f'Python {target.python}: set `target: "{target.release}"` in the pipeline spec and '
            f"rebuild, or deploy an image of release {meta.get('release')}"
        )
    return problems


def _format_problem(problem: Any) -> str:
    where = getattr(problem, "file", None) or getattr(problem, "model", None) or ""
    line = getattr(problem, "line", None)
    if where and line:
        where = f"{where}:{line}"
    message = getattr(problem, "message", str(problem))
    return f"{where}: {message}" if where else str(message)


def decoupled_models(models: Sequence[Any]) -> set[str]:
    """Names of the decoupled models among ``RepoModel``s: ``model_transaction_policy { decoupled:
    true }``, and every ensemble with a decoupled step (Triton serves such an ensemble as decoupled,
    whatever its own config says), to any depth."""
    steps = {
        str(m.name): [str(s.model_name) for s in m.config.ensemble_scheduling.step]
        for m in models
        if m.is_ensemble
    }
    # An ensemble's own flag does not count: Triton sets it from its steps (a `decoupled: true`
    # ensemble without a decoupled step is served unary; measured on 2.51).
    found = {str(m.name) for m in models if not m.is_ensemble and m.config.model_transaction_policy.decoupled}
    changed = True
    while changed:
        changed = False
        for name, members in steps.items():
            if name not in found and any(member in found for member in members):
                found.add(name)
                changed = True
    return found


def _first_streaming_step(model: Any, streaming: set[str]) -> str:
    """The first step of an ensemble whose model is decoupled ("" for other models)."""
    if not model.is_ensemble:
        return ""
    steps = model.config.ensemble_scheduling.step
    return next((str(s.model_name) for s in steps if s.model_name in streaming), "")


def summarise_model(model: Any, *, decoupled: bool = False, via: str = "") -> ModelSummary:
    """A ModelSummary from a ``tritonkit.repository.RepoModel`` (its config proto)."""
    cfg = model.config
    dyn = cfg.dynamic_batching if cfg.HasField("dynamic_batching") else None
    preferred = tuple(int(s) for s in dyn.preferred_batch_size) if dyn is not None else ()
    count = 0
    gpu = False
    for group in cfg.instance_group:
        count += int(group.count) or 1
        # KIND_AUTO (0) and KIND_GPU (1) use a GPU where one exists.
        gpu = gpu or int(group.kind) in (0, 1)
    # Some backends pick their own device whatever the kind (vLLM: KIND_MODEL, the GPU on
    # NVIDIA's vLLM image).
    kind = kind_for(backend=str(cfg.backend), platform=str(cfg.platform))
    gpu = gpu or (kind is not None and kind.deploy.picks_own_device)
    return ModelSummary(
        name=str(model.name),
        is_ensemble=bool(model.is_ensemble),
        max_batch_size=int(cfg.max_batch_size),
        preferred_batch_sizes=preferred,
        instance_count=max(count, 1),
        uses_gpu=gpu,
        decoupled=decoupled or (not model.is_ensemble and bool(cfg.model_transaction_policy.decoupled)),
        decoupled_via=via,
        backend=str(cfg.backend),
    )


#: Bounds for the derived per-instance concurrency.
MIN_CONCURRENCY = 2
MAX_CONCURRENCY = 1000


def max_concurrent_requests(models: Iterable[ModelSummary]) -> int:
    """How many requests one serving instance should accept at once, from the repository's batching.

    For every non-ensemble model: ``capacity = batch x instances``, where ``batch`` is the largest
    preferred batch size, else ``max_batch_size``, else 1 (no batching), and ``instances`` is the
    total ``instance_group`` count. The result is ``2 x`` the largest capacity (one full batch
    executing while the next one queues, so the dynamic batcher can form full batches), clamped to
    [2, 1000]. Azure ML's default of 1 serialises every request, so batching never happens and
    concurrent clients get 429s.
    """
    capacities = [
        (max(m.preferred_batch_sizes) if m.preferred_batch_sizes else max(m.max_batch_size, 1))
        * m.instance_count
        for m in models
        if not m.is_ensemble
    ]
    capacity = max(capacities, default=1)
    return min(max(2 * capacity, MIN_CONCURRENCY), MAX_CONCURRENCY)


def ensembles(models: Iterable[ModelSummary]) -> list[str]:
    """Names of the ensemble models (the ones a smoke test calls)."""
    return sorted(m.name for m in models if m.is_ensemble)
