"""Wires the verbs into one Typer app and turns TritonKitError into exit code 1."""

from __future__ import annotations

import sys

import typer

from tritonkit import __version__
from tritonkit.cli import build, deploy, heal, infer, openai, perf, render, serve, tune, validate
from tritonkit.errors import TritonKitError

app = typer.Typer(
    name="tritonkit",
    help="Build, validate, serve, deploy and benchmark NVIDIA Triton model repositories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

app.command("build", help=build.HELP)(build.command)
app.command("validate", help=validate.HELP)(validate.command)
app.command("serve", help=serve.HELP)(serve.command)
app.command("heal", help=heal.HELP)(heal.command)
app.command("infer", help=infer.HELP)(infer.command)
app.command("perf", help=perf.HELP)(perf.command)
app.command("tune", help=tune.HELP)(tune.command)
app.command("openai", help=openai.HELP)(openai.command)
app.add_typer(deploy.app, name="deploy", help=deploy.HELP)


def _version(value: bool) -> None:
    if value:
        render.info(f"tritonkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version."
    ),
) -> None:
    """tritonkit: Triton model repositories from build to benchmark."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        app(args=argv, prog_name="tritonkit")
    except TritonKitError as exc:
        render.error(exc)
        sys.exit(1)
    except KeyboardInterrupt:
        render.err_console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
