"""``python-import-unavailable``: a Python model imports what its production image will not have.

A Python-backend model's top-level imports must come from the standard library, what every
tritonserver image ships (numpy, ``triton_python_backend_utils``), its packed environment
(``EXECUTION_ENV_PATH``), or files in its own model directory. Anything else imports fine on a
developer's venv and fails at load time in Azure; this check names the module, the file and
line, and the fix (``requirements:`` in the spec).

When ``EXECUTION_ENV_PATH`` points somewhere this machine cannot read (an absolute path inside
the serving image), the model's imports are not judged: saying "missing" there would be a guess.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

from tritonkit.config import ModelConfig
from tritonkit.repository import pyenv
from tritonkit.repository.validator._report import Problem

__all__ = ["CODE", "check_python_imports", "top_level_imports"]

CODE = "python-import-unavailable"
_STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
#: Import names whose distribution is named differently (for the fix in the message).
_DISTRIBUTIONS = {
    "PIL": "pillow",
    "cv2": "opencv-python-headless",
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "google": "protobuf",
}
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


def check_python_imports(
    config: ModelConfig, *, model: str, model_dir: Path, display_dir: str, versions: tuple[int, ...]
) -> list[Problem]:
    """Problems for the model files of a Python-backend ``config`` (none for other backends)."""
    if config.backend != "python":
        return []
    provided: set[str] = set(_STDLIB) | set(pyenv.IMAGE_PROVIDED)
    env_hint = ""
    if pyenv.ENV_PARAMETER in config.parameters:
        value = config.parameters[pyenv.ENV_PARAMETER].string_value
        archive = pyenv.resolve_env_path(value, model_dir)
        modules = pyenv.archive_modules(archive) if archive is not None and archive.is_file() else None
        if modules is None:
            return []  # an environment this machine cannot read: do not guess
        provided |= modules
        env_hint = f" nor in its packed environment {value}"
    filename = config.default_model_filename or "model.py"
    problems: list[Problem] = []
    for version in versions:
        vdir = model_dir / str(version)
        source = vdir / filename
        if not source.is_file():
            continue  # the layout check reports a missing model file
        try:
            tree = ast.parse(source.read_bytes(), filename=str(source))
        except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
            # Not ours to report: the model-file check names unparsable sources (and Triton's
            # load error names a syntax error).
            continue
        local = _local_modules(vdir, model_dir)
        for name, line in top_level_imports(tree):
            if name in provided or name in local:
                continue
            problems.append(
                Problem(
                    severity="error",
                    model=model,
                    file=f"{display_dir}/{version}/{filename}",
                    line=line,
                    code=CODE,
                    message=(
                        f"imports '{name}', which is not in the standard library, not in the "
                        f"tritonserver image (numpy, triton_python_backend_utils){env_hint}, and not "
                        f"a file of the model directory; add it to the model's `requirements:` in "
                        f"the pipeline spec (e.g. requirements: [{_DISTRIBUTIONS.get(name, name)}]) so "
                        "`tritonkit build` packs it"
                    ),
                )
            )
    return problems
