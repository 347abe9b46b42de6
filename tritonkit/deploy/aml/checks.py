"""Offline checks of a repository for Azure ML: decoupled models, TensorRT-LLM, the upload layout
under the SDK's own ignore rules, the SDK's entity validation and its YAML loaders."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from tritonkit._extras import require
from tritonkit.deploy.aml.azure import first_line
from tritonkit.deploy.aml.options import FEATURE
from tritonkit.deploy.checks import ModelSummary, raise_if
from tritonkit.kinds import all_kinds, kind_for
from tritonkit.kinds.ensemble import ENSEMBLE


def decoupled_problems(models: list[ModelSummary]) -> list[str]:
    """What will not work for each decoupled model on an Azure ML managed online endpoint.

    Azure ML documents Triton no-code deployments as called over HTTP on the scoring URI's
    ``/v2/models/<model>/infer`` ("Deploy a model with Triton": the test uses tritonclient.http;
    online endpoints "return predictions under the HTTP protocol", concept-endpoints-online):
    no gRPC port and no streamed answer are documented, and every request is cut at
    request_timeout_ms (180 s at most). Triton 2.51 answers /infer for a decoupled model with 501
    (measured: tests/integration/test_decoupled_triton.py), so such an endpoint could only fail.
    """
    problems: list[str] = []
    for m in (m for m in models if m.decoupled):
        what = (
            f"ensemble '{m.name}' is decoupled because its step '{m.decoupled_via}' is (whatever its "
            "own config says)"
            if m.is_ensemble
            else f"model '{m.name}' is decoupled"
        )
        problem = (
            f"{what}: Azure ML routes only HTTP POST /v2/models/{m.name}/infer to Triton, which answers "
            "it with 501 for a decoupled model; the gRPC stream and generate_stream it needs are not "
            "served there"
        )
        kind = kind_for(backend=m.backend) if m.backend else None
        if kind is not None:
            problem += kind.deploy.aml_decoupled_note
        problems.append(problem)
    return problems


def backend_warnings(repository: Path) -> list[str]:
    """What tritonkit cannot check offline about the models of kinds Azure ML's no-code Triton
    image may not serve (TensorRT-LLM: the kinds' ``deploy.aml_warning``).

    (Decoupled ones are refused with every other decoupled model.)
    """
    warnings: list[str] = []
    for kind in all_kinds():
        if not kind.deploy.aml_warning:
            continue
        models = kind.models_in(repository)
        if models:
            warnings.append(kind.deploy.aml_warning.format(models=", ".join(models)))
    return warnings


def aml_layout_problems(repository: Path) -> tuple[list[str], list[str]]:
    """(problems, warnings) with the files Azure ML would upload from ``repository``.

    Uses the SDK's own upload listing (``.amlignore``, else ``.gitignore``, at the repository
    root, gitignore syntax), so a ``config.pbtxt`` or a model file hidden by those rules is
    caught before an upload that would produce an endpoint Triton cannot start.
    """
    assets = require("azure.ai.ml._utils._asset_utils", feature=FEATURE)
    root = Path(repository).resolve()
    ignore = assets.get_ignore_file(root)
    uploaded = {
        Path(remote).as_posix()
        for _local, remote in assets.get_upload_files_from_folder(root, prefix="", ignore_file=ignore)
    }
    source = f" by {Path(str(ignore.path)).name}" if ignore.exists() else ""
    problems: list[str] = []
    warnings: list[str] = []
    model_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    ensembles_here = set(ENSEMBLE.models_in(root))
    if not model_dirs:
        problems.append(f"{root} has no model directories (<root>/<model>/config.pbtxt)")
    for mdir in model_dirs:
        name = mdir.name
        if f"{name}/config.pbtxt" not in uploaded:
            if (mdir / "config.pbtxt").is_file():
                problems.append(f"{name}/config.pbtxt is excluded from the upload{source}")
            else:
                problems.append(f"{name}/ has no config.pbtxt (Azure ML's Triton needs <model>/config.pbtxt)")
        versions = [d for d in mdir.iterdir() if d.is_dir() and d.name.isdigit()]
        for other in sorted(d.name for d in mdir.iterdir() if d.is_dir() and not d.name.isdigit()):
            if other != "configs":
                warnings.append(f"{name}/{other}/ is not a numeric version directory; Triton ignores it")
        for v in versions:
            if v.name != str(int(v.name)):
                problems.append(
                    f"{name}/{v.name}/: version directories must not start with 0 (Triton skips them)"
                )
        if not versions:
            problems.append(f"{name}/ has no numeric version directory (<model>/1/...)")
        for v in versions:
            local = [p for p in v.rglob("*") if p.is_file()]
            sent = [p for p in local if p.relative_to(root).as_posix() in uploaded]
            if local and len(sent) < len(local):
                hidden = sorted(p.relative_to(root).as_posix() for p in local if p not in sent)
                listing = ", ".join(hidden[:5]) + (f" and {len(hidden) - 5} more" if len(hidden) > 5 else "")
                if sent:
                    # Maybe on purpose (logs, caches); Triton fails later if the model needed them.
                    warnings.append(f"{listing} excluded from the upload{source}")
                else:
                    problems.append(
                        f"{listing} excluded from the upload{source}: {name}/{v.name}/ arrives empty"
                    )
            elif not local and name not in ensembles_here:
                problems.append(f"{name}/{v.name}/ is empty: Triton finds no model file to load")
            elif not local:
                warnings.append(
                    f"{name}/{v.name}/ is empty and blob storage keeps no empty directories: tritonkit "
                    f"uploads it with a placeholder file; before `az ml model create -f model.yml` "
                    f"add one yourself (touch {name}/{v.name}/.keep)"
                )
    return problems, warnings


def sdk_validate(endpoint: Any, deployment: Any) -> None:
    """The SDK's own entity -> REST validation, which it otherwise runs only after calling Azure."""
    ml = require("azure.ai.ml", feature=FEATURE)
    problems: list[str] = []
    # Any region will do: the location is only copied into the REST body.
    for what, entity, method, kwargs in (
        ("endpoint", endpoint, "_to_rest_online_endpoint", {"location": "westeurope"}),
        ("deployment", deployment, "_to_rest_object", {"location": "westeurope"}),
    ):
        try:
            getattr(entity, method)(**kwargs)
        except (ml.exceptions.ValidationException, ml.exceptions.MlException, ValueError, TypeError) as exc:
            problems.append(f"{what}: {getattr(exc, 'message', None) or exc}")
    raise_if(problems, "the Azure ML SDK rejects this deployment")


def check_yaml(texts: dict[str, str], *, relative_origin: Path, repository: Path) -> None:
    """Load the rendered YAML with the SDK's loaders (the schemas `az ml` uses) and compare back."""
    ml = require("azure.ai.ml", feature=FEATURE)
    from marshmallow.exceptions import ValidationError as SchemaError

    origin = str(relative_origin / "x.yml")
    problems: list[str] = []
    loaded: dict[str, Any] = {}
    for name, loader in (
        ("model.yml", ml.load_model),
        ("endpoint.yml", ml.load_online_endpoint),
        ("deployment.yml", ml.load_online_deployment),
    ):
        try:
            loaded[name] = loader(source=io.StringIO(texts[name]), relative_origin=origin)
        except SchemaError as exc:
            problems.append(f"{name}: {json.dumps(exc.messages, default=str)}")
        except (ml.exceptions.ValidationException, ml.exceptions.MlException, ValueError) as exc:
            problems.append(f"{name}: {first_line(exc)}")
    raise_if(problems, "the generated Azure ML YAML does not load with the SDK")
    model = loaded["model.yml"]
    resolved = (relative_origin / str(model.path)).resolve()
    if resolved != Path(repository).resolve():
        problems.append(f"model.yml path resolves to {resolved}, not the repository {repository}")
    if str(model.type) != "triton_model":
        problems.append(f"model.yml loads with type {model.type!r}, not triton_model")
    dep = loaded["deployment.yml"]
    if dep.request_settings is None or (dep.request_settings.max_concurrent_requests_per_instance or 1) <= 1:
        problems.append("deployment.yml has no max_concurrent_requests_per_instance above 1")
    raise_if(problems, "the generated Azure ML YAML does not say what was planned")
