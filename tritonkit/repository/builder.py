"""Atomic repository builder: spec -> ``<repo>/<model>/<version>/<file>`` + config.pbtxt.

Every model of a build is first written completely into a scratch directory next to the
repository; only when all of them succeeded are they swapped in by ``os.rename``. A failing
generator, a corrupt ONNX file or a refused overwrite therefore leaves the previous repository
exactly as it was. A top-level manifest remembers which spec built which models, so several
specs live side by side and rebuilding one replaces only its own models.
"""

from __future__ import annotations

import ast
import filecmp
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tritonkit._python_source import parse_source
from tritonkit.config import ModelConfig, read_config, write_config
from tritonkit.errors import ModelImportError, RepositoryError, SpecError, TritonKitError
from tritonkit.kinds import registry
from tritonkit.kinds.base import BackendKind
from tritonkit.kinds.entry import ModelEntry, ModelKind, check_model_name, spec_line
from tritonkit.kinds.paths import DEFAULT_SERVING_ROOT, check_serving_root
from tritonkit.repository import execution_env_build
from tritonkit.repository.custom_image import CustomImage
from tritonkit.repository.execution_env import PipOptions
from tritonkit.repository.generators import GeneratorCache
from tritonkit.repository.manifest import Manifest
from tritonkit.repository.modelconfig import build_config, label_sources
from tritonkit.repository.onnx_import import OnnxSignature, read_onnx_signature, signature_from_bytes
from tritonkit.repository.onnx_io import OnnxIO, OnnxReadError, read_onnx_io, read_onnx_io_bytes
from tritonkit.repository.spec import load_spec
from tritonkit.repository.validator.decoupled_rules import CALL_PATHS, served_decoupled
from tritonkit.repository.validator.model_files import Finding, onnx_findings
from tritonkit.repository.validator.pipeline_rules import concurrency_ceiling

__all__ = ["BuildResult", "BuiltModel", "build_entries", "build_onnx_model", "build_spec"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class BuiltModel:
    name: str
    path: Path
    version: int
    kind: str
    variants: tuple[str, ...] = ()
    decoupled: bool = False  # as Triton will serve it (an ensemble with a decoupled step is)


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    """What a build wrote: the repository, the spec name, its models, the models it removed."""

    repository: Path
    spec: str
    models: tuple[BuiltModel, ...]
    removed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what the user should know about serving it (decoupled models)


def build_spec(
    spec_path: str | Path,
    out_dir: str | Path,
    *,
    force: bool = False,
    serving_root: str = DEFAULT_SERVING_ROOT,
    pip: PipOptions | None = None,
) -> BuildResult:
    """Build every model of a pipeline spec into ``out_dir`` (created if missing).

    ``serving_root`` is where the serving container mounts the repository: vLLM stages name
    their packed model directory by its absolute path under it (see tritonkit/kinds/vllm), TensorRT-LLM
    stages their engine and tokenizer (unless a stage sets its own ``serving_root:``). ``pip``:
    where packed Python environments get their wheels (a local directory, offline).
    """
    spec = load_spec(spec_path, serving_root=serving_root)
    return build_entries(
        spec.models,
        out_dir,
        owner=spec.name,
        source=str(spec.path.resolve()),
        force=force,
        serving_root=serving_root,
        image=spec.image,
        pip=pip,
    )


def build_onnx_model(
    onnx_path: str | Path,
    out_dir: str | Path,
    *,
    name: str,
    max_batch_size: int | None = None,
    dynamic_batching: bool = False,
    version: int = 1,
    instance_group: Sequence[dict[str, Any]] = (),
    force: bool = False,
) -> BuildResult:
    """Build one ONNX model, its config read from the file (see :mod:`onnx_import`)."""
    src = Path(onnx_path)
    check_model_name(name, where=str(src))
    if isinstance(max_batch_size, int) and max_batch_size < 0:
        raise SpecError(f"max_batch_size must be >= 0, got {max_batch_size}")
    if version < 1:
        raise SpecError(f"version must be a positive integer, got {version}")
    fields: dict[str, Any] = {"backend": "onnxruntime"}
    if max_batch_size is not None:
        fields["max_batch_size"] = max_batch_size
    if dynamic_batching:
        fields["dynamic_batching"] = {}
    if instance_group:
        fields["instance_group"] = list(instance_group)
    entry = ModelEntry(
        name=name,
        kind=ModelKind.ONNX,
        source=src.resolve(),
        generator=None,
        files=(),
        version=version,
        fields=MappingProxyType(fields),
        variants=MappingProxyType({}),
        steps=(),
        base=src.resolve().parent,
        where=f"{src}: model '{name}'",
    )
    return build_entries([entry], out_dir, owner=f"model:{name}", source=str(src.resolve()), force=force)


def build_entries(
    entries: Sequence[ModelEntry],
    out_dir: str | Path,
    *,
    owner: str,
    source: str,
    force: bool = False,
    serving_root: str = DEFAULT_SERVING_ROOT,
    image: CustomImage | None = None,
    pip: PipOptions | None = None,
) -> BuildResult:
    """Stage ``entries`` completely, then swap them into ``out_dir`` under ``owner`` (``image``:
    the spec's own serving image, recorded in the manifest for validate and deploy)."""
    serving_root = check_serving_root(serving_root)
    kinds = {e.name: registry.kind_of_entry(e) for e in entries}
    names_serving_root = any(k is not None and k.build.records_serving_root for k in kinds.values())
    repo = Path(out_dir).absolute()
    if repo.is_symlink():
        repo = repo.resolve()  # scratch next to the real directory so renames stay on one filesystem
    if repo.exists() and not repo.is_dir():
        raise RepositoryError(f"{repo} exists and is not a directory", hint="choose another -o DIR")
    manifest = Manifest.load(repo) if repo.is_dir() else Manifest()
    names = [e.name for e in entries]
    _check_targets(repo, entries, manifest, owner=owner, force=force)
    previously = manifest.models_of(owner)
    remove = [m for m in previously if m not in names and (repo / m).exists() and manifest.owner(m) == owner]
    # packed before anything is written
    entries, envs = execution_env_build.prepare(entries, image=image, pip=pip)

    try:
        repo.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".tritonkit-tmp-{repo.name}-build-", dir=repo.parent))
    except OSError as exc:
        raise RepositoryError(f"cannot write next to {repo}: {exc.strerror or exc}") from exc
    try:
        built = []
        configs: dict[str, ModelConfig] = {}
        generators = GeneratorCache()
        write_notes: list[str] = []
        for entry in entries:
            existing = repo / entry.name if (repo / entry.name).is_dir() else None
            model, config = _write_model(
                entry,
                scratch,
                existing,
                repo=repo,
                force=force,
                generators=generators,
                serving_root=serving_root,
                notes=write_notes,
            )
            built.append(model)
            configs[entry.name] = config
            execution_env_build.finish(entry, scratch / entry.name, envs, config, image=image)
        served, notes = decoupled_notes(configs, repo)
        notes = write_notes + notes
        built = [replace(m, decoupled=served.get(m.name, False)) for m in built]
        targets = {
            **execution_env_build.recorded_targets(entries),
            **{e.name: e.target for e in entries if e.target and _records_target(kinds[e.name])},
        }
        manifest.assign(
            owner,
            source,
            names,
            targets,
            serving_root=serving_root if names_serving_root else None,
            bls_external={e.name: list(e.bls_external) for e in entries if e.bls_external},
            image=image.to_record() if image is not None else None,
        )
        _commit(scratch, repo, names, remove, manifest)
    except OSError as exc:
        raise RepositoryError(
            f"building into {repo} failed, nothing was changed: {exc.strerror or exc}"
            + (f" ({exc.filename})" if exc.filename else ""),
            hint="check free disk space and permissions, then build again",
        ) from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log.info("built %d model(s) of %s into %s", len(built), owner, repo)
    return BuildResult(
        repository=repo, spec=owner, models=tuple(built), removed=tuple(remove), notes=tuple(notes)
    )


def decoupled_notes(configs: Mapping[str, ModelConfig], repo: Path) -> tuple[dict[str, bool], list[str]]:
    """Which built models Triton serves decoupled, and what to say about it.

    An ensemble's own ``model_transaction_policy`` does not count: Triton derives it from its
    steps (see validator/decoupled_rules.py). Members built earlier are read from ``repo``.
    """
    known = dict(configs)
    tried: set[str] = set()
    missing = _members_outside(known, tried)
    while missing:
        for name in missing:
            tried.add(name)
            try:
                known[name] = read_config(repo / name / "config.pbtxt")
            except (OSError, TritonKitError):
                pass  # unknown member: nothing is said about its ensembles
        missing = _members_outside(known, tried)
    served: dict[str, bool] = {}
    notes: list[str] = []
    verdicts = served_decoupled(known)
    for name, cfg in configs.items():
        if cfg.platform != "ensemble":
            served[name] = bool(cfg.model_transaction_policy.decoupled)
            if served[name]:
                notes.append(f"'{name}' is decoupled: {CALL_PATHS.format(model=name)}")
                ceiling = concurrency_ceiling(name, cfg, known, repo)
                if ceiling is not None:
                    notes.append(ceiling)
            continue
        streams = verdicts.get(name)
        if streams is None:
            continue
        if streams.branching is not None:
            notes.append(
                f"Triton will refuse ensemble '{name}': step of model '{streams.branching.model}' "
                "receives inputs originated from different decoupled models (`tritonkit validate` "
                "says where)"
            )
            continue
        served[name] = streams.decoupled
        if streams.decoupled:
            step = cfg.ensemble_scheduling.step[streams.decoupled_steps[0]].model_name
            notes.append(
                f"ensemble '{name}' is decoupled because its step '{step}' is, whatever its own "
                f"config says: {CALL_PATHS.format(model=name)}"
            )
        elif cfg.model_transaction_policy.decoupled:
            notes.append(
                f"ensemble '{name}' says decoupled: true but none of its steps is decoupled; Triton "
                "sets it to false (one response a request)"
            )
    return served, notes


def _members_outside(known: Mapping[str, ModelConfig], tried: set[str]) -> list[str]:
    return sorted(
        {
            step.model_name
            for cfg in known.values()
            if cfg.platform == "ensemble"
            for step in cfg.ensemble_scheduling.step
            if step.model_name and step.model_name not in known and step.model_name not in tried
        }
    )


# --------------------------------------------------------------------------------------------


def _check_targets(
    repo: Path, entries: Sequence[ModelEntry], manifest: Manifest, *, owner: str, force: bool
) -> None:
    for entry in entries:
        target = repo / entry.name
        if target.is_symlink():
            raise RepositoryError(
                f"{target} is a symbolic link; tritonkit does not write through links",
                hint="replace the link with a real directory or build into another repository",
            )
        if target.exists() and not target.is_dir():
            raise RepositoryError(f"{target} exists and is not a model directory", hint="move it away")
        if target.exists():
            current = manifest.owner(entry.name)
            if current != owner and not force:
                whose = f"spec '{current}'" if current else "no tritonkit spec (it was made by hand)"
                raise RepositoryError(
                    f"model '{entry.name}' already exists in {repo} and belongs to {whose}",
                    hint="rename the model in your spec, or pass --force to take it over",
                )


def _write_model(
    entry: ModelEntry,
    scratch: Path,
    existing: Path | None,
    *,
    repo: Path,
    force: bool,
    generators: GeneratorCache,
    serving_root: str,
    notes: list[str],
) -> tuple[BuiltModel, ModelConfig]:
    """Write one model into the scratch directory (renamed into the repository as a whole, so
    files here need no atomic writes of their own); returns it and its config.pbtxt."""
    model_dir = scratch / entry.name
    vdir = model_dir / str(entry.version)
    vdir.mkdir(parents=True)
    signature: OnnxSignature | None = None
    graph_io: OnnxIO | None = None
    kind = registry.kind_of_entry(entry)
    written = kind.write_version(entry, vdir, serving_root=serving_root) if kind is not None else None
    if written is not None:
        notes.extend(written)
    elif entry.kind is ModelKind.ONNX:
        target = vdir / _model_filename(entry, _default_filename(kind, ".onnx"))
        if entry.generator is not None:
            data = generators.run(entry)
            source = f"{entry.generator[0]}:{entry.generator[1]}"
            signature = signature_from_bytes(data, source=source)
            graph_io = _graph_io(lambda: read_onnx_io_bytes(data), source)
            target.write_bytes(data)
        else:
            src = _existing_file(entry.source, entry)
            signature = read_onnx_signature(src)
            graph_io = _graph_io(lambda: read_onnx_io(src), str(src))
            shutil.copyfile(src, target)
    elif entry.kind is ModelKind.PYTHON:
        src = _existing_file(entry.source, entry)
        _check_python_model(src, entry)
        shutil.copyfile(src, vdir / _model_filename(entry, _default_filename(kind, ".py")))
    elif entry.kind is ModelKind.OTHER:
        src = _existing_file(entry.source, entry, allow_dir=True)
        # e.g. a TensorRT-LLM engine directory lands where its gpt_model_path points
        _copy_any(src, vdir / _model_filename(entry, _default_filename(kind, src.suffix)))
    for extra in entry.files:
        _copy_any(_existing_file(extra, entry, allow_dir=True), vdir / extra.name)

    config = _config(entry, entry.fields, signature)
    _cross_check(entry, config, graph_io, variant=None)
    write_config(config, model_dir / "config.pbtxt", atomic=False)
    labels = set(label_sources(entry.fields))
    for vname, overrides in entry.variants.items():
        merged = {**entry.fields, **overrides}
        labels.update(label_sources(merged))
        variant = _config(entry, merged, signature)
        _cross_check(entry, variant, graph_io, variant=(vname, overrides))
        write_config(variant, model_dir / "configs" / f"{vname}.pbtxt", atomic=False)
    for label in sorted(labels):
        src = _existing_file((entry.base / label).resolve(), entry)
        shutil.copyfile(src, model_dir / src.name)

    if existing is not None:
        _carry_versions(existing, model_dir, entry, repo=repo, force=force)
    built = BuiltModel(
        name=entry.name,
        path=repo / entry.name,
        version=entry.version,
        kind=entry.kind.value,
        variants=tuple(entry.variants),
    )
    return built, config


def _config(entry: ModelEntry, fields: Mapping[str, Any], signature: OnnxSignature | None) -> ModelConfig:
    kind = registry.kind_of_entry(entry)
    own = kind.config(entry, fields) if kind is not None else None
    return own if own is not None else build_config(entry, fields, signature=signature)


def _default_filename(kind: BackendKind | None, suffix: str) -> str:
    """The kind's model file name in the version dir, else ``model<suffix>``."""
    name = kind.build.default_filename if kind is not None else None
    return name or f"model{suffix}"


def _records_target(kind: BackendKind | None) -> bool:
    return kind is not None and kind.build.records_target


def _graph_io(read: Callable[[], OnnxIO], source: str) -> OnnxIO:
    try:
        io = read()
    except OnnxReadError as exc:
        raise ModelImportError(
            f"{source}: cannot read the ONNX graph's inputs and outputs: {exc}",
            hint="re-export the model, or check the file was not truncated",
        ) from exc
    return io


#: config field path prefix -> the spec key it comes from
_SPEC_KEYS = {"input": "inputs", "output": "outputs", "max_batch_size": "max_batch_size"}


def _cross_check(
    entry: ModelEntry,
    config: ModelConfig,
    graph_io: OnnxIO | None,
    *,
    variant: tuple[str, Any] | None,
) -> None:
    """The validator's ONNX checks on what the build is about to write; errors fail it.

    (A model.py's tensor names only ever give warnings, which `tritonkit validate` reports.)
    """
    if graph_io is None:
        return
    findings = onnx_findings(config, graph_io, filename="the ONNX file")
    errors = [f for f in findings if f.severity == "error"]
    for f in findings:
        if f.severity == "warning":
            log.warning("%s: %s", entry.where, f.message)
    if not errors:
        return
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    what = f"model '{entry.name}'" + (f", variant '{variant[0]}'" if variant else "")
    source = entry.generator[0] if entry.generator else entry.source
    message = f"{what}: {first.message.replace('the ONNX file', str(source))}{more}"
    hint = "declare the tensors as the ONNX graph has them, or drop inputs/outputs to read them from the file"
    if entry.spec is None:
        raise SpecError(f"{entry.where}: {message}", hint=hint)
    raise SpecError(message, file=entry.spec, line=_finding_line(entry, first, variant), hint=hint)


def _finding_line(entry: ModelEntry, finding: Finding, variant: tuple[str, Any] | None) -> int | None:
    if entry.spec is None:
        return None
    keys: list[str | int] = []
    if finding.at:
        head = finding.at.split(".")[0]
        name, _, index = head.partition("[")
        spec_key = _SPEC_KEYS.get(name)
        if spec_key is not None:
            keys = [spec_key] + ([int(index.rstrip("]"))] if index else [])
    if variant is not None and keys and keys[0] in variant[1]:
        keys = ["variants", variant[0], *keys]
    return spec_line(entry.spec, entry.name, *keys)


def _model_filename(entry: ModelEntry, default: str) -> str:
    name = entry.fields.get("default_model_filename")
    if not name:
        return default
    return check_model_name(name, where=entry.where, what="default_model_filename")


def _carry_versions(existing: Path, model_dir: Path, entry: ModelEntry, *, repo: Path, force: bool) -> None:
    """Keep the model's other versions; refuse to change an existing version without force."""
    _refuse_escaping_links(existing, repo)
    for child in sorted(existing.iterdir()):
        if not (child.is_dir() and child.name.isdigit()):
            continue
        if int(child.name) == entry.version:
            if not force and not _same_tree(child, model_dir / child.name):
                raise RepositoryError(
                    f"version {entry.version} of model '{entry.name}' already exists in {existing.parent} "
                    "with different files",
                    hint="bump 'version' in the spec to add a new version, or pass --force to overwrite it",
                )
            continue
        shutil.copytree(child, model_dir / child.name, symlinks=True, copy_function=_link_or_copy)


def _commit(scratch: Path, repo: Path, names: list[str], remove: list[str], manifest: Manifest) -> None:
    """Swap the scratch directory's models in with renames only; roll back if a rename fails."""
    if not repo.exists():
        manifest.write(scratch)
        os.chmod(scratch, 0o755)
        os.rename(scratch, repo)
        return
    trash = Path(tempfile.mkdtemp(prefix=f".tritonkit-tmp-{repo.name}-old-", dir=repo.parent))
    moved_out: list[str] = []
    moved_in: list[str] = []
    try:
        for name in [*remove, *names]:
            target = repo / name
            if target.exists() or target.is_symlink():
                os.rename(target, trash / name)
                moved_out.append(name)
        for name in names:
            os.rename(scratch / name, repo / name)
            moved_in.append(name)
        manifest.write(repo)
    except BaseException:
        for name in reversed(moved_in):
            os.rename(repo / name, scratch / name)
        for name in reversed(moved_out):
            os.rename(trash / name, repo / name)
        raise
    finally:
        shutil.rmtree(trash, ignore_errors=True)


def _existing_file(path: Path | None, entry: ModelEntry, *, allow_dir: bool = False) -> Path:
    if path is None:
        raise SpecError(f"{entry.where}: needs a 'source' file")
    if not path.exists():
        raise SpecError(
            f"{entry.where}: file not found: {path}", hint="fix the path (relative to the spec file)"
        )
    if path.is_dir() and not allow_dir:
        raise SpecError(f"{entry.where}: {path} is a directory, expected a file")
    return path


def _copy_any(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)


def _link_or_copy(src: str, dst: str) -> str:
    # Old versions are never modified in place, so a hard link is a safe, instant copy.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def _same_tree(a: Path, b: Path) -> bool:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    if files_a != files_b:
        return False
    return all(filecmp.cmp(a / rel, b / rel, shallow=False) for rel in files_a)


def _refuse_escaping_links(model_dir: Path, repo: Path) -> None:
    root = repo.resolve()
    for dirpath, dirnames, filenames in os.walk(model_dir):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(root):
                    raise RepositoryError(
                        f"{path} is a symbolic link to {target}, outside the repository",
                        hint="replace the link with a copy of the file, or remove it",
                    )


def _check_python_model(src: Path, entry: ModelEntry) -> None:
    try:
        tree = parse_source(src.read_bytes(), str(src))
    except SyntaxError as exc:
        raise ModelImportError(
            f"{src}:{exc.lineno}: Python model source does not parse: {exc.msg}",
            hint=f"fix the syntax error ({entry.where})",
        ) from exc
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes; absurdly deep nesting
        raise ModelImportError(
            f"{src}: Python model source cannot be parsed: {type(exc).__name__}",
            hint=f"check that the file is Python source ({entry.where})",
        ) from exc
    if not any(isinstance(n, ast.ClassDef) and n.name == "TritonPythonModel" for n in tree.body):
        raise ModelImportError(
            f"{src}: Python-backend model defines no 'TritonPythonModel' class",
            hint="the Python backend loads the class TritonPythonModel from model.py",
        )
