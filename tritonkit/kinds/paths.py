"""Served paths: where a model's files lie on the serving node, and back.

Triton serves a repository mounted at some root (NVIDIA's documentation mounts it at ``/models``)
and keeps a model's files under ``<root>/<model>/<version>/...``. Backends that take absolute paths
in their configs (vLLM's ``model.json``, TensorRT-LLM's ``gpt_model_path``, the tokenizer and
vision directories) get ``<serving root>/<model>/<version>/<rest>`` from the build. The reverse,
:func:`local_path`, is the one served-path rule of the library: the validator, the OpenAI front, ``tritonkit
serve`` and deploy read such a path back into the repository with it. The Python code that runs
inside Triton keeps its own copies (it cannot import tritonkit); a unit test holds them to this one.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from tritonkit.errors import SpecError

__all__ = ["DEFAULT_SERVING_ROOT", "check_serving_root", "local_path", "served_path", "serving_root_of"]

#: where NVIDIA's documentation mounts the repository (``-v $PWD/model_repository:/models``)
DEFAULT_SERVING_ROOT = "/models"


def check_serving_root(root: str) -> str:
    """An absolute POSIX directory (the repository's path inside the serving container)."""
    path = PurePosixPath(root)
    if not root or not path.is_absolute() or ".." in path.parts or "\\" in root:
        raise SpecError(
            f"serving root must be an absolute POSIX path such as /models, got {root!r}",
            hint="it is where the serving container mounts the repository (--serving-root)",
        )
    return str(path)


def served_path(serving_root: str, model: str, version: int, *rest: str) -> str:
    """``<serving_root>/<model>/<version>/<rest...>``: a file of the model as the server sees it."""
    return "/".join([serving_root.rstrip("/"), model, str(version), *rest])


def local_path(server_path: str, *, model_dir: Path) -> Path | None:
    """Where ``server_path``, named in ``model_dir``'s config or version files, lies here.

    ``<anything>/<model>/<N>/<rest>`` (``<model>``: ``model_dir``'s name, ``<N>`` any version
    number, the first such pair) is ``model_dir/<N>/<rest>``, whatever the serving root: that is
    where Triton keeps version N's files, whichever version names the path. Another absolute path
    that exists here is itself; anything else (a path only the server has, a relative path, whose
    meaning is each backend's own) is None.
    """
    path = PurePosixPath(server_path)
    if not path.is_absolute():
        return None
    parts = path.parts
    for i in range(len(parts) - 1):
        if parts[i] == model_dir.name and parts[i + 1].isdigit():
            return model_dir.joinpath(*parts[i + 1 :])
    own = Path(server_path)
    return own if own.exists() else None


def serving_root_of(server_path: str, *, model: str) -> str | None:
    """The serving root ``server_path``, named in ``model``'s files, expects the repository at.

    What precedes the first ``<model>/<N>`` pair (the rule of :func:`local_path`); None for a
    relative path or one without such a pair.
    """
    path = PurePosixPath(server_path)
    if not path.is_absolute():
        return None
    parts = path.parts
    for i in range(1, len(parts) - 1):
        if parts[i] == model and parts[i + 1].isdigit():
            return str(PurePosixPath(*parts[:i]))
    return None
