"""Rules about the files on disk: version directories, model files, label files, symlinks."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from tritonkit.config import ModelConfig
from tritonkit.kinds.rules import selected_versions
from tritonkit.repository.validator.report import ConfigFile, Problem, Severity

__all__ = [
    "AUTO_FILES",
    "check_checksums",
    "check_execution_env",
    "check_layout",
    "check_runtime",
    "check_symlinks",
    "expected_model_file",
    "hidden_directory",
    "selected_versions",
]

#: files from which Triton can infer a backend (and often auto-complete a missing config)
AUTO_FILES = (
    "model.onnx",
    "model.plan",
    "model.savedmodel",
    "model.graphdef",
    "model.pt",
    "model.py",
    "model.xml",
)
# Without a config.pbtxt Triton picks the backend from these files and lets it complete the
# config (the Python backend calls the model's own auto_complete_config, if it has one).
_AUTOCOMPLETE_FILES = ("model.onnx", "model.plan", "model.savedmodel", "model.pt", "model.py")
_PLATFORM_FILES = {
    "tensorrt_plan": "model.plan",
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
    "onnxruntime_onnx": "model.onnx",
    "pytorch_libtorch": "model.pt",
}
_BACKEND_FILES = {
    "onnxruntime": "model.onnx",
    "python": "model.py",
    "tensorrt": "model.plan",
    "pytorch": "model.pt",
    "openvino": "model.xml",
    "tensorflow": "model.savedmodel",
}


def expected_model_file(cfg: ModelConfig) -> str | None:
    """The file Triton loads from each version directory (None: ensemble or unknown backend)."""
    if cfg.platform == "ensemble":
        return None
    if cfg.default_model_filename:
        return str(cfg.default_model_filename)
    return _PLATFORM_FILES.get(cfg.platform) or _BACKEND_FILES.get(cfg.backend)


def _instance_groups_refused(cf: ConfigFile) -> bool:
    """The config rules already refused this config's instance groups."""
    return any(p.code == "instance-group-invalid" and p.file == cf.display for p in cf.sink)


def check_layout(cf: ConfigFile, *, model_dir: Path, display_dir: str, versions: Sequence[int]) -> None:
    cfg = cf.config
    if not versions:
        cf.error(
            "no-version",
            f"model '{cf.model}' has no version directory (e.g. {display_dir}/1); "
            "Triton needs at least one version to load it",
            at=None,
        )
        return
    chosen = selected_versions(cfg, versions)
    if cfg.version_policy.HasField("specific"):
        missing = [v for v in cfg.version_policy.specific.versions if v not in versions]
        if missing and not chosen:
            cf.error(
                "no-version",
                f"none of the versions {list(cfg.version_policy.specific.versions)} named by version_policy "
                f"exist (found {list(versions)})",
                at="version_policy",
            )
            return
        if missing:
            cf.warning(
                "version-missing",
                f"version_policy names version(s) {missing} that do not exist",
                at="version_policy",
            )
    if _instance_groups_refused(cf):
        # Triton validates the instance groups (ValidateInstanceGroup, while it normalizes the
        # config) before it resolves a backend or its model file, and stops there: it reports the
        # GPU id alone (QA noautofill_platform/negative_gpu, served on 2.51).
        return
    filename = expected_model_file(cfg)
    if not cfg.platform and not cfg.backend:
        inferable = any((model_dir / str(v) / f).exists() for v in chosen for f in AUTO_FILES)
        if not inferable:
            cf.error(
                "no-backend",
                "config sets neither platform nor backend, and no model file tells Triton which to use",
                at="name",
            )
        return
    if filename is not None:
        for v in chosen:
            if not (model_dir / str(v) / filename).exists():
                cf.error(
                    "model-file-missing",
                    f"version {v} has no {filename} (expected at {display_dir}/{v}/{filename} for "
                    f"{'platform ' + cfg.platform if cfg.platform else 'backend ' + cfg.backend})",
                    at="default_model_filename" if cfg.default_model_filename else None,
                )
    for i, out in enumerate(cfg.output):
        if out.label_filename and not (model_dir / out.label_filename).is_file():
            cf.error(
                "label-file-missing",
                f"output '{out.name}' names label file '{out.label_filename}', which is not in {display_dir}",
                at=f"output[{i}].label_filename",
            )


def check_runtime(
    cf: ConfigFile, *, model_dir: Path, versions: Sequence[int], known_backend: str | None
) -> None:
    """A ``runtime`` Triton cannot find: it looks the name up in each version directory, the model
    directory and the backend's directory, and refuses a name that leads out of them.

    ``known_backend`` is the model's backend when it is one whose directory tritonkit knows (it
    holds ``libtriton_<backend>.so``, or ``model.py`` for a Python-based backend); None for a
    custom backend, whose directory only the server knows."""
    runtime = cf.config.runtime
    if not runtime:
        return
    if "/" in runtime or "\\" in runtime or runtime in (".", ".."):
        cf.error(
            "runtime-invalid",
            f"runtime '{runtime}' is a path; Triton takes only a file name here, looked up in the "
            "version, model and backend directories (a name that escapes them is refused)",
            at="runtime",
        )
        return
    backend = known_backend
    if backend is None or runtime in (f"libtriton_{backend}.so", "model.py"):
        return
    if not any((d / runtime).is_file() for d in [model_dir, *(model_dir / str(v) for v in versions)]):
        cf.error(
            "runtime-invalid",
            f"runtime '{runtime}' is neither in the model's directories nor the {backend} backend's "
            f"library (libtriton_{backend}.so); Triton fails to find it. Leave runtime empty to use "
            "the backend's own",
            at="runtime",
        )


def config_missing(model: str, model_dir: Path, display_dir: str, versions: Sequence[int]) -> Problem:
    """No config.pbtxt: fine when Triton can auto-complete it from the model file, else an error."""
    auto = [f for v in versions for f in _AUTOCOMPLETE_FILES if (model_dir / str(v) / f).exists()]
    if auto:
        via = " (Python backend; model.py's auto_complete_config, if any, adds the rest)"
        via = via if auto[0] == "model.py" else ""
        severity: Severity = "warning"
        message = (
            f"no config.pbtxt; Triton must auto-complete it from {auto[0]}{via} "
            "(write one with `tritonkit build` to pin tensors and batching)"
        )
    else:
        severity, message = "error", "no config.pbtxt and no model file Triton could auto-complete one from"
    return Problem(
        severity=severity,
        model=model,
        file=f"{display_dir}/config.pbtxt",
        line=None,
        code="config-missing",
        message=message,
    )


def check_symlinks(model: str, model_dir: Path, display_dir: str, root: Path) -> list[Problem]:
    """Links that resolve outside the repository: Triton would follow them, we refuse them."""
    problems = []
    for dirpath, dirnames, filenames in os.walk(model_dir):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                rel = path.relative_to(model_dir)
                problems.append(
                    Problem(
                        severity="error",
                        model=model,
                        file=f"{display_dir}/{rel}",
                        line=None,
                        code="symlink-escape",
                        message=f"symbolic link points outside the repository (to {path.resolve()})",
                    )
                )
    return problems


_MODEL_DIR_TOKEN = "$$TRITON_MODEL_DIRECTORY"


def check_execution_env(cf: ConfigFile, *, model_dir: Path) -> None:
    """The Python backend's EXECUTION_ENV_PATH must exist once ``$$TRITON_MODEL_DIRECTORY`` is
    expanded (Triton refuses the model: "Failed to get the canonical path")."""
    cfg = cf.config
    if cfg.backend != "python" or "EXECUTION_ENV_PATH" not in cfg.parameters:
        return
    raw = cfg.parameters["EXECUTION_ENV_PATH"].string_value
    at = "parameters[EXECUTION_ENV_PATH]"
    expanded = raw.replace(_MODEL_DIR_TOKEN, str(model_dir.resolve()))
    if not raw:
        cf.error("execution-env-missing", "EXECUTION_ENV_PATH is empty; name a conda-pack archive", at=at)
        return
    if not Path(expanded).is_absolute():
        cf.warning(
            "execution-env-relative",
            f"EXECUTION_ENV_PATH '{raw}' is relative: Triton resolves it against the server's working "
            f"directory; write it as {_MODEL_DIR_TOKEN}/{raw}",
            at=at,
        )
        return
    env = Path(expanded)
    if not env.exists():
        cf.error(
            "execution-env-missing",
            f"EXECUTION_ENV_PATH '{raw}' does not exist (looked for {expanded}); build the archive "
            "(e.g. conda-pack) into the model directory, or fix the path",
            at=at,
        )
    elif env.is_dir() and not (env / "bin" / "activate").is_file():
        # A directory is used as an unpacked environment; the backend sources its bin/activate.
        cf.error(
            "execution-env-invalid",
            f"EXECUTION_ENV_PATH '{raw}' is a directory without bin/activate; point it at a "
            "conda-pack archive or an unpacked environment",
            at=at,
        )


def check_checksums(cf: ConfigFile, *, model_dir: Path) -> None:
    """Hashes given to Triton's checksum repository agent, verified against the files.

    The agent reads each parameter as ``<ALGORITHM>:<path relative to the model directory>`` ->
    lower-case hex digest; it only knows MD5 and refuses the model on any mismatch.
    """
    for a, agent in enumerate(cf.config.model_repository_agents.agents):
        if agent.name != "checksum":
            continue
        for key in sorted(agent.parameters):
            expected = agent.parameters[key]
            at = f"model_repository_agents.agents[{a}].parameters[{key}]"
            algorithm, colon, rel = key.partition(":")
            if not colon:
                cf.error(
                    "checksum-invalid",
                    f"checksum agent key '{key}' must be ALGORITHM:FILE, e.g. MD5:1/model.onnx",
                    at=at,
                )
                continue
            if algorithm.lower() != "md5":
                cf.error(
                    "checksum-invalid",
                    f"checksum agent supports only MD5, got '{algorithm}' for {rel}",
                    at=at,
                )
                continue
            path = model_dir / rel
            try:
                digest = hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
            except OSError as exc:
                cf.error(
                    "checksum-file-missing",
                    f"checksum agent names '{rel}', which cannot be read ({exc.strerror})",
                    at=at,
                )
                continue
            if digest != expected:
                cf.error(
                    "checksum-mismatch",
                    f"MD5 of {rel} is {digest}, the config expects {expected!r} "
                    "(the agent compares lower-case hex exactly); update the hash or the file",
                    at=at,
                )


def hidden_directory(model: str, display_dir: str, problems: Sequence[Problem]) -> Problem:
    """A dot-directory Triton takes for a model and refuses (e.g. ``.ipynb_checkpoints``)."""
    first = problems[0]
    return Problem(
        severity="error",
        model=model,
        file=display_dir,
        line=None,
        code="hidden-directory",
        message=f"Triton loads every directory of the repository as a model, hidden ones too, and "
        f"refuses '{model}' ({first.code}: {first.message}); delete it or move it out of the repository",
    )
