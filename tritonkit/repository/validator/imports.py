"""``python-import-unavailable``: a Python model imports what its serving image will not have.

A Python-backend model's top-level imports must come from the serving image (its standard
library and installed packages), the model's packed environment (``EXECUTION_ENV_PATH``), or
files in its own model directory. What the image provides is known only for a *target*
(:class:`tritonkit.repository.image_packages.ImageTarget`): a stock NGC release (``--target``, or the one
``tritonkit build`` recorded) or a custom image's pip freeze (``--image-requirements``). Against a
target, a missing import is an error (the model fails to load there). Without one it is a
warning naming both fixes: public repositories run Python models on images their READMEs
extend with torch or OpenCV, and saying "Triton refuses this" there would be false.

When ``EXECUTION_ENV_PATH`` points somewhere this machine cannot read (an absolute path inside
the serving image), the model's imports are not judged: saying "missing" there would be a guess.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tritonkit._python_source import parse_source
from tritonkit.config import ModelConfig
from tritonkit.repository import execution_env
from tritonkit.repository.custom_image import CustomImage
from tritonkit.repository.image_packages import (
    ImageTarget,
    distribution_for,
    release_target,
    stdlib_modules,
    stock_image_target,
)
from tritonkit.repository.manifest import Manifest
from tritonkit.repository.validator.report import ConfigFile, FileContext, Problem, Severity

__all__ = [
    "CODE",
    "check_python_file",
    "check_python_imports",
    "model_target",
    "packed_release",
    "top_level_imports",
]

CODE = "python-import-unavailable"
_PYTHON = "python"  # the backend whose model.py this module reads
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def top_level_imports(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """(top-level package, line) of each absolute import run when the module loads.

    Imports inside functions and classes run later and are not "top-level"; an import inside a
    ``try`` whose handler catches ImportError is optional by design and is skipped, as is
    ``if TYPE_CHECKING:``.
    """
    yield from _walk(tree.body)


def _walk(body: list[ast.stmt]) -> Iterator[tuple[str, int]]:
    for node in body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".", 1)[0], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.module.split(".", 1)[0], node.lineno
        elif isinstance(node, ast.Try):
            if not any(_catches_import_error(h) for h in node.handlers):
                yield from _walk(node.body)
            yield from _walk(node.orelse)
            yield from _walk(node.finalbody)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _walk(node.body)
                yield from _walk(node.orelse)
        elif isinstance(node, ast.With):
            yield from _walk(node.body)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in _IMPORT_ERRORS for t in types)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _local_modules(*dirs: Path) -> set[str]:
    names: set[str] = set()
    for directory in dirs:
        if not directory.is_dir():
            continue
        for child in directory.iterdir():
            if child.suffix == ".py" or (child.suffix == ".so" and "." in child.stem):
                names.add(child.name.split(".", 1)[0])
            elif child.is_dir() and child.name.isidentifier():
                names.add(child.name)
    return names


def packed_release(config: ModelConfig, model_dir: Path) -> str | None:
    """The release a tritonkit-packed ``EXECUTION_ENV_PATH`` archive was made for (None otherwise)."""
    if execution_env.ENV_PARAMETER not in config.parameters:
        return None
    value = config.parameters[execution_env.ENV_PARAMETER].string_value
    archive = execution_env.resolve_env_path(value, model_dir)
    meta = execution_env.read_metadata(archive) if archive is not None and archive.is_file() else None
    release = meta.get("release") if meta is not None else None
    return str(release) if release in execution_env.TARGETS else None


def check_python_imports(
    config: ModelConfig,
    *,
    model: str,
    model_dir: Path,
    display_dir: str,
    versions: tuple[int, ...],
    target: ImageTarget | None,
) -> list[Problem]:
    """Problems for the model files of a Python-backend ``config`` (none for other backends).

    ``target``: the image the model will run on; None when unknown (findings are warnings).
    """
    if config.backend != _PYTHON:
        return []
    # Without a target: any Python's standard library, and what every tritonserver image has.
    provided: set[str] = (
        set(target.stdlib() | target.provided)
        if target
        else set(stdlib_modules(None) | execution_env.IMAGE_PROVIDED)
    )
    env_hint = ""
    if execution_env.ENV_PARAMETER in config.parameters:
        value = config.parameters[execution_env.ENV_PARAMETER].string_value
        archive = execution_env.resolve_env_path(value, model_dir)
        modules = (
            execution_env.archive_modules(archive) if archive is not None and archive.is_file() else None
        )
        if modules is None:
            return []  # an environment this machine cannot read: do not guess
        provided |= modules
        env_hint = f", not in its packed environment {value}"
    filename = config.default_model_filename or "model.py"
    problems: list[Problem] = []
    for version in versions:
        vdir = model_dir / str(version)
        source = vdir / filename
        if not source.is_file():
            continue  # the layout check reports a missing model file
        try:
            tree = parse_source(source.read_bytes(), str(source))
        except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
            # Not ours to report: the model-file check names unparsable sources (and Triton's
            # load error names a syntax error).
            continue
        local = _local_modules(vdir, model_dir)
        for name, line in top_level_imports(tree):
            if name in provided or name in local:
                continue
            severity: Severity = "error" if target is not None else "warning"
            problems.append(
                Problem(
                    severity=severity,
                    model=model,
                    file=f"{display_dir}/{version}/{filename}",
                    line=line,
                    code=CODE,
                    message=_message(name, target, env_hint),
                )
            )
    return problems


def model_target(
    cf: ConfigFile, model_dir: Path, explicit: ImageTarget | None, recorded: Manifest | None
) -> ImageTarget | None:
    """The image a Python model's imports are judged against: the one given to the validator,
    else the custom image or release ``tritonkit build`` recorded or packed for the model (None:
    unknown)."""
    if explicit is not None:
        return explicit
    image = recorded.image_of(cf.model) if recorded is not None else None
    if image is not None:
        return CustomImage.from_record(image).target()
    release = recorded.target_of(cf.model) if recorded is not None else None
    release = release or packed_release(cf.config, model_dir)
    if release is None:
        return None
    # recorded by a tritonkit whose table had it: still a stock image
    if release not in execution_env.TARGETS:
        return stock_image_target(f"tritonserver {release} (recorded by tritonkit build)")
    return release_target(release)


def check_python_file(
    cf: ConfigFile, ctx: FileContext, *, explicit: ImageTarget | None, recorded: Manifest | None
) -> None:
    """The imports of a Python model's model.py against the serving image, on config.pbtxt only
    (the validator's, not the Python kind's: it takes the image's packages and the manifest)."""
    if ctx.variant or cf.config.backend != _PYTHON:
        return
    for problem in check_python_imports(
        cf.config,
        model=cf.model,
        model_dir=ctx.model_dir,
        display_dir=ctx.display,
        versions=ctx.versions,
        target=model_target(cf, ctx.model_dir, explicit, recorded),
    ):
        cf.add(problem)


def _message(name: str, target: ImageTarget | None, env_hint: str) -> str:
    pack = (
        f"add it to the model's `requirements:` in the pipeline spec (e.g. requirements: "
        f"[{distribution_for(name)}]) so `tritonkit build` packs it"
    )
    if target is None:
        return (
            f"imports '{name}', which is not in the standard library{env_hint} and not a file of the "
            "model directory; no serving image is known, so whether it provides the module cannot be "
            "told (a stock tritonserver image has only numpy and triton_python_backend_utils). "
            f"Either pack it ({pack}), or declare the image: `--target RELEASE` for a stock NGC "
            "tritonserver release, `--image-requirements FILE` with the `pip freeze` of a custom image"
        )
    if target.custom:
        return (
            f"imports '{name}', which {target.description} does not provide{env_hint} and which is "
            f"not a file of the model directory; {pack}, or install it in the image"
        )
    return (
        f"imports '{name}', which is not in the standard library of {target.description}, not in "
        f"that image (it has numpy and triton_python_backend_utils){env_hint}, and not a file of the "
        f"model directory; {pack} (a custom serving image that installs it: `tritonkit validate "
        "--image-requirements FILE` with its `pip freeze`)"
    )
