"""`tritonkit build`: a pipeline spec (YAML) or one ONNX file -> a Triton model repository."""

from __future__ import annotations

from pathlib import Path

import typer

from tritonkit.cli import render
from tritonkit.kinds.paths import DEFAULT_SERVING_ROOT
from tritonkit.repository import BuildResult, build_onnx_model, build_spec
from tritonkit.repository.execution_env import PipOptions

HELP = (
    "Build a model repository from a pipeline spec (SPEC.yaml) or a single ONNX file "
    "(model.onnx --name NAME). Atomic: a failed build leaves DIR as it was."
)


def command(
    source: Path = typer.Argument(
        ..., metavar="SPEC_OR_ONNX", help="A pipeline spec (.yaml/.yml) or a model.onnx file."
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", help="The model repository to write (created if missing)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Overwrite an existing version and take over models of other specs."
    ),
    name: str | None = typer.Option(None, "--name", help="Model name (ONNX input only; default: file stem)."),
    max_batch_size: int | None = typer.Option(
        None,
        "--max-batch-size",
        min=0,
        help="ONNX input only. Default: 8 when the first dimension is dynamic, else 0.",
    ),
    dynamic_batching: bool = typer.Option(
        False, "--dynamic-batching", help="ONNX input only: enable Triton's dynamic batcher."
    ),
    version: int = typer.Option(1, "--version", min=1, help="ONNX input only: the version to write."),
    serving_root: str = typer.Option(
        DEFAULT_SERVING_ROOT,
        "--serving-root",
        help="Where the serving container mounts the repository; vLLM stages name their packed "
        "model directory under it (NVIDIA's docs mount /models).",
    ),
    find_links: list[Path] = typer.Option(
        [],
        "--find-links",
        metavar="DIR",
        help="A local wheel directory the pip that packs Python environments searches (repeat for "
        "more); with --no-index the build needs no network (see docs/build.md: offline builds).",
    ),
    no_index: bool = typer.Option(
        False, "--no-index", help="Never ask the package index: wheels come from --find-links only."
    ),
) -> None:
    if no_index and not find_links:
        raise typer.BadParameter(
            "--no-index needs --find-links DIR (where the wheels are)", param_hint="--no-index"
        )
    missing = [str(d) for d in find_links if not d.is_dir()]
    if missing:
        raise typer.BadParameter(f"not a directory: {', '.join(missing)}", param_hint="--find-links")
    if source.suffix.lower() == ".onnx":
        result = build_onnx_model(
            source,
            output,
            name=name or source.stem,
            max_batch_size=max_batch_size,
            dynamic_batching=dynamic_batching,
            version=version,
            force=force,
        )
    else:
        if name is not None or max_batch_size is not None or dynamic_batching or version != 1:
            raise typer.BadParameter(
                "--name, --max-batch-size, --dynamic-batching and --version apply to a .onnx input; "
                "set them in the spec instead",
                param_hint="SOURCE",
            )
        pip = PipOptions(find_links=tuple(d.resolve() for d in find_links), no_index=no_index)
        result = build_spec(source, output, force=force, serving_root=serving_root, pip=pip)
    _report(result)


def _report(result: BuildResult) -> None:
    render.info(f"built {len(result.models)} model(s) of '{result.spec}' into {result.repository}")
    render.table(
        None,
        ["model", "kind", "version", "variants", "decoupled"],
        [
            (m.name, m.kind, m.version, ", ".join(m.variants) or "-", "yes" if m.decoupled else "-")
            for m in result.models
        ],
    )
    for removed in result.removed:
        render.info(f"removed '{removed}' (no longer in '{result.spec}')")
    for note in result.notes:
        render.info(note)
