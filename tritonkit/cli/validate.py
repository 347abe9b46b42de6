"""`tritonkit validate`: find statically, with file and line, what Triton would reject at load."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from tritonkit.cli import render
from tritonkit.errors import SpecError
from tritonkit.repository import image_target, validate_repository
from tritonkit.repository.custom_image import check_python_version

HELP = (
    "Validate a model repository statically: layout, config.pbtxt rules, ensemble wiring, model "
    "files, Python imports. Python imports are judged against the serving image: --target, "
    "--image-requirements, or the release `tritonkit build` recorded; with none known, an import "
    "the image may lack is a warning. Exit 0 when valid (warnings allowed, unless --strict), 1 "
    "when not, 2 on a usage error."
)


def command(
    repository: Path = typer.Argument(
        ..., exists=True, file_okay=False, dir_okay=True, help="The model repository to check."
    ),
    as_json: bool = typer.Option(
        False, "--json", help='Print one JSON object: {"valid": bool, "problems": [...]}.'
    ),
    model_config_name: str | None = typer.Option(
        None,
        "--model-config-name",
        help="Judge each model by configs/<NAME>.pbtxt where it has one (as Triton's flag does).",
    ),
    target: str | None = typer.Option(
        None,
        "--target",
        metavar="RELEASE",
        help="The stock NGC tritonserver release the repository will run on (e.g. 24.10, for "
        "nvcr.io/nvidia/tritonserver:24.10-py3): a Python import that neither the image, the "
        "model's packed environment nor its directory provides is an error. Overrides the "
        "release `tritonkit build` recorded.",
    ),
    image_requirements: Path | None = typer.Option(
        None,
        "--image-requirements",
        metavar="FILE",
        help="A custom serving image's `pip freeze` (run inside the image): what it lists is "
        "provided, any other non-stdlib import is an error. With --target, that release's Python "
        "decides the standard library.",
    ),
    image_python: str | None = typer.Option(
        None,
        "--image-python",
        metavar="X.Y",
        help="The custom image's Python (with --image-requirements): decides its standard library.",
    ),
    bls_external: list[str] = typer.Option(
        [],
        "--bls-external",
        metavar="MODEL",
        help="A model BLS calls may name that another repository serves (repeat per model); "
        "spec key bls_external does the same per calling model.",
    ),
    no_auto_complete: bool = typer.Option(
        False,
        "--no-auto-complete",
        help="Judge configs as written, as `tritonserver --disable-auto-complete-config` does: "
        "without what a backend's auto-complete adds (a Python model's auto_complete_config: "
        "decoupled, max_batch_size; an LLM backend's decoupled policy and tensors).",
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Treat warnings as errors (exit 1): e.g. a BLS call naming a model the repository "
        "lacks, which Triton loads and fails only at request time.",
    ),
) -> None:
    try:
        image = image_target(target, image_requirements)
        if image_python is not None:
            if image is None or not image.custom:
                raise SpecError("--image-python describes the image of --image-requirements; pass both")
            image = replace(image, python=check_python_version(image_python))
    except SpecError as exc:  # an unknown release or an unreadable freeze file: a usage error
        option = "--image-requirements" if image_requirements is not None and target is None else "--target"
        option = "--image-python" if image_python is not None and "python" in exc.message.lower() else option
        detail = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        raise typer.BadParameter(detail, param_hint=option) from exc
    report = validate_repository(
        repository,
        config_name=model_config_name or None,
        target=image,
        bls_external=bls_external,
        auto_complete=not no_auto_complete,
    )
    if strict:
        report = report.strict()
    if as_json:
        render.print_json(report.to_dict())
    else:
        for problem in report.problems:
            render.info(str(problem))
        errors, warnings = len(report.errors), len(report.warnings)
        verdict = "valid" if report.valid else "invalid"
        render.info(f"{repository}: {verdict} ({errors} error(s), {warnings} warning(s))")
    raise typer.Exit(0 if report.valid else 1)
