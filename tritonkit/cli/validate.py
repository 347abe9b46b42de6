"""`tritonkit validate`: find statically, with file and line, what Triton would reject at load."""

from __future__ import annotations

from pathlib import Path

import typer

from tritonkit.cli import render
from tritonkit.repository import validate_repository

HELP = (
    "Validate a model repository statically: layout, config.pbtxt rules, ensemble wiring. "
    "Exit 0 when valid (warnings allowed), 1 when not, 2 on a usage error."
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
) -> None:
    report = validate_repository(repository, config_name=model_config_name or None)
    if as_json:
        render.print_json(report.to_dict())
    else:
        for problem in report.problems:
            render.info(str(problem))
        errors, warnings = len(report.errors), len(report.warnings)
        verdict = "valid" if report.valid else "invalid"
        render.info(f"{repository}: {verdict} ({errors} error(s), {warnings} warning(s))")
    raise typer.Exit(0 if report.valid else 1)
