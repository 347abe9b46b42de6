"""The validator's run: every model directory, its configs and files, then the cross-model rules."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tritonkit.config import parse_config
from tritonkit.errors import ConfigParseError, RepositoryError
from tritonkit.kinds import registry
from tritonkit.kinds.rules import selected_versions
from tritonkit.repository.image_packages import ImageTarget, load_image_requirements, release_target
from tritonkit.repository.manifest import Manifest
from tritonkit.repository.scan import version_dirs
from tritonkit.repository.validator.bls_rules import check_bls_calls
from tritonkit.repository.validator.config_rules import KNOWN_BACKENDS, PLATFORM_BACKEND, check_config
from tritonkit.repository.validator.decoupled_rules import check_decoupled
from tritonkit.repository.validator.dispatch_rules import check_parallel_step_failure
from tritonkit.repository.validator.ensemble_rules import (
    ModelDirectory,
    check_ensembles,
    check_members_loadable,
)
from tritonkit.repository.validator.imports import check_python_file
from tritonkit.repository.validator.layout import (
    check_checksums,
    check_execution_env,
    check_layout,
    check_runtime,
    check_symlinks,
    config_missing,
    hidden_directory,
)
from tritonkit.repository.validator.model_files import check_model_files
from tritonkit.repository.validator.pipeline_rules import check_pipeline_concurrency
from tritonkit.repository.validator.report import (
    ConfigFile,
    FileContext,
    Problem,
    RepositoryContext,
    ValidationReport,
)

__all__ = ["FILE_CHECKS", "FileCheck", "image_target", "validate_repository"]

#: A check of one parsed config against the files of its model directory (model files, archives,
#: hashes). It reports through ``cf.error``/``cf.warning``; ``versions`` are the version dirs found.
FileCheck = Callable[[ConfigFile, Path, str, Sequence[int]], None]

if TYPE_CHECKING:
    from tritonkit.kinds.base import BackendKind


def _layout(cf: ConfigFile, model_dir: Path, display: str, versions: Sequence[int]) -> None:
    check_layout(cf, model_dir=model_dir, display_dir=display, versions=versions)
    backend = cf.config.backend or PLATFORM_BACKEND.get(cf.config.platform, "")
    known = backend if backend in KNOWN_BACKENDS else None
    check_runtime(cf, model_dir=model_dir, versions=versions, known_backend=known)


def _parameter_files(cf: ConfigFile, model_dir: Path, display: str, versions: Sequence[int]) -> None:
    check_execution_env(cf, model_dir=model_dir)
    check_checksums(cf, model_dir=model_dir)


def _model_files(cf: ConfigFile, model_dir: Path, display: str, versions: Sequence[int]) -> None:
    check_model_files(cf, model_dir=model_dir, display_dir=display, versions=versions)


#: The file checks every config (and each configs/*.pbtxt variant) of a model gets, whatever its
#: backend; each backend kind's own file checks run after them (see ``_kind_checks``), then the
#: Python imports of config.pbtxt's model against the serving image (``imports.check_python_file``).
FILE_CHECKS: list[FileCheck] = [_layout, _parameter_files, _model_files]


def image_target(
    target: str | ImageTarget | None = None, image_requirements: str | Path | None = None
) -> ImageTarget | None:
    """The serving image ``target`` (an NGC release such as "24.10") and/or ``image_requirements``
    (a custom image's ``pip freeze``) describe; None when neither is given.

    Raises SpecError for a release not in the table or an unreadable requirements file.
    """
    base = release_target(target) if isinstance(target, str) else target
    if image_requirements is not None:
        return load_image_requirements(image_requirements, base=base)
    return base


def validate_repository(
    repo: str | Path,
    *,
    config_name: str | None = None,
    target: str | ImageTarget | None = None,
    image_requirements: str | Path | None = None,
    bls_external: Collection[str] = (),
    auto_complete: bool = True,
) -> ValidationReport:
    """Check every model of ``repo``.

    With ``config_name``, each model is judged by ``configs/<config_name>.pbtxt`` where it has
    one (Triton's ``--model-config-name``); without it, ``config.pbtxt`` is judged and every
    ``configs/*.pbtxt`` variant is checked too.

    Python imports are judged against the serving image: ``target`` (an NGC release, "24.10")
    and/or ``image_requirements`` (a custom image's ``pip freeze`` file) when given, else the
    release ``tritonkit build`` recorded for the model; with none known, a module the image may
    or may not have is a warning, not an error.

    ``auto_complete`` False mirrors ``tritonserver --disable-auto-complete-config``: each config is
    judged as written, without what the backend's auto-complete (a Python model's
    ``auto_complete_config``) would add.
    """
    root = Path(repo)
    if not root.is_dir():
        raise RepositoryError(
            f"{root} is not a directory", hint="pass the model repository (the directory holding model dirs)"
        )
    explicit = image_target(target, image_requirements)
    recorded = _recorded_targets(root)
    real_root = root.resolve()
    problems: list[Problem] = []
    infos: dict[str, ModelDirectory] = {}
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        # Triton takes every sub-directory for a model, hidden ones included (2.51 refuses an
        # `.ipynb_checkpoints/` and fails the start); plain files are not models.
        display = str(root / child.name)
        if child.is_symlink() and not child.resolve().is_relative_to(real_root):
            problems.append(
                Problem(
                    severity="error",
                    model=child.name,
                    file=display,
                    line=None,
                    code="symlink-escape",
                    message=f"model directory links outside the repository (to {child.resolve()})",
                )
            )
            continue
        if not child.is_dir():
            continue
        if child.name.startswith("."):
            own: list[Problem] = []
            infos[child.name] = _check_model(
                child, display, real_root, config_name, own, explicit, recorded, auto_complete
            )
            errors = [p for p in own if p.severity == "error"]
            problems.extend([hidden_directory(child.name, display, errors)] if errors else own)
            continue
        infos[child.name] = _check_model(
            child, display, real_root, config_name, problems, explicit, recorded, auto_complete
        )
    check_ensembles(infos)
    refused = {p.model for p in problems if p.severity == "error"}
    check_decoupled(infos, refused)
    check_pipeline_concurrency({n: i for n, i in infos.items() if n not in refused}, real_root)
    check_members_loadable(infos, refused)
    check_parallel_step_failure(infos)
    context = RepositoryContext(root=root, infos=infos, explicit=explicit, recorded=recorded)
    for kind in registry.all_kinds():
        for repository_check in kind.repository_checks:
            repository_check(context)
    external: dict[str, list[str]] = recorded.bls_external() if recorded is not None else {}
    external["*"] = list(bls_external)
    check_bls_calls(infos, root=root, display_root=str(root), external=external)
    return ValidationReport(repository=root, problems=problems)


def _recorded_targets(root: Path) -> Manifest | None:
    """The build manifest, if tritonkit built this repository (an unreadable one counts as none:
    the validator judges a repository, it does not repair tritonkit's bookkeeping)."""
    try:
        return Manifest.load(root)
    except RepositoryError:
        return None


def _kind_checks(cf: ConfigFile, context: FileContext) -> None:
    """Every backend kind's file checks on ``cf``, in the registry's order; each check decides
    which configs it applies to (TensorRT-LLM's also judge its Python tokenizer models)."""
    for kind in registry.all_kinds():
        for check in kind.file_checks:
            check(cf, context)


def _check_model(
    model_dir: Path,
    display: str,
    root: Path,
    config_name: str | None,
    problems: list[Problem],
    explicit: ImageTarget | None,
    recorded: Manifest | None,
    auto_complete: bool = True,
) -> ModelDirectory:
    name = model_dir.name
    versions = version_dirs(model_dir)
    context = FileContext(
        model_dir=model_dir,
        display=display,
        versions=tuple(versions),
        explicit=explicit,
        recorded=recorded,
        auto_complete=auto_complete,
    )
    problems.extend(check_symlinks(name, model_dir, display, root))
    cfg_path = model_dir / "config.pbtxt"
    variants: list[Path] = []
    configs_dir = model_dir / "configs"
    if config_name:
        chosen = configs_dir / f"{config_name}.pbtxt"
        if chosen.is_file():
            cfg_path = chosen
    elif configs_dir.is_dir():
        variants = sorted(configs_dir.glob("*.pbtxt"))

    cf: ConfigFile | None = None
    if not cfg_path.is_file():
        problems.append(config_missing(name, model_dir, display, versions))
        if not versions:
            problems.append(_no_version(name, display))
    else:
        cf = _load(name, cfg_path, f"{display}/{cfg_path.relative_to(model_dir)}", problems)
        if cf is not None:
            _check_completed(cf, context)
            for check in FILE_CHECKS:
                check(cf, model_dir, display, versions)
            _kind_checks(cf, context)
            check_python_file(cf, context, explicit=explicit, recorded=recorded)
        elif not versions:
            problems.append(_no_version(name, display))
    for variant in variants:
        vcf = _load(name, variant, f"{display}/configs/{variant.name}", problems)
        if vcf is not None:
            _check_completed(vcf, context)
            if versions:
                for check in FILE_CHECKS:
                    check(vcf, model_dir, display, versions)
            _kind_checks(vcf, replace(context, variant=True, main=cf))
    return ModelDirectory(name=name, cf=cf, versions=versions)


def _no_version(model: str, display: str) -> Problem:
    """A model directory with neither a readable config nor a version: Triton has nothing to load."""
    return Problem(
        severity="error",
        model=model,
        file=display,
        line=None,
        code="no-version",
        message=f"model '{model}' has no version directory (e.g. {display}/1)",
    )


def _check_completed(cf: ConfigFile, context: FileContext) -> None:
    """The config rules on the config Triton judges: with auto-complete on (Triton's default), what
    the backend kind's auto-complete fills in is applied first (a Python model's own
    auto_complete_config, the vLLM backend's), and every later rule sees it."""
    kind = registry.kind_for_config(cf.config)
    if kind is None and not (cf.config.backend or cf.config.platform):
        kind = _kind_from_files(cf, context)
    if context.auto_complete and kind is not None and kind.auto_complete is not None:
        kind.auto_complete(cf, context)
    check_config(cf, dir_name=cf.model)


def _kind_from_files(cf: ConfigFile, context: FileContext) -> BackendKind | None:
    """The kind Triton picks for a config naming neither backend nor platform: the Python
    backend when a loaded version holds its model file (Triton then sets ``backend: "python"``)."""
    filename = cf.config.default_model_filename or "model.py"
    chosen = selected_versions(cf.config, context.versions)
    if any((context.model_dir / str(v) / filename).is_file() for v in chosen):
        return registry.kind_for_source(Path(filename))
    return None


def _load(model: str, path: Path, display: str, problems: list[Problem]) -> ConfigFile | None:
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        problems.append(_parse_problem(model, display, line, "config file is not UTF-8 text"))
        return None
    except OSError as exc:
        problems.append(_parse_problem(model, display, None, f"cannot read config file: {exc.strerror}"))
        return None
    try:
        cfg = parse_config(text, source=display)
    except ConfigParseError as exc:
        message = exc.message.split(": ", 1)[1] if exc.message.startswith(display) else exc.message
        problems.append(_parse_problem(model, display, exc.line, message + _placeholder_hint(text, exc.line)))
        return None
    return ConfigFile(model=model, path=path, display=display, text=text, config=cfg, sink=problems)


_PLACEHOLDER = re.compile(r"\$\{([^}\n]*)\}")


def _placeholder_hint(text: str, line: int | None) -> str:
    """What to do when the line Triton cannot parse holds a template placeholder (NVIDIA's
    TensorRT-LLM templates: ``data_type: ${logits_datatype}``, ``max_batch_size:
    ${triton_max_batch_size}``)."""
    lines = text.splitlines()
    if line is None or not 0 < line <= len(lines):
        return ""
    names = _PLACEHOLDER.findall(lines[line - 1])
    if not names:
        return ""
    filled = ",".join(f"{n}:<value>" for n in names)
    return (
        f" (unfilled template placeholder {', '.join('${' + n + '}' for n in names)}: Triton cannot "
        f"parse it; fill the template first, e.g. python3 tools/fill_template.py -i config.pbtxt {filled})"
    )


def _parse_problem(model: str, display: str, line: int | None, message: str) -> Problem:
    return Problem(
        severity="error", model=model, file=display, line=line, code="config-parse", message=message
    )
