"""Packed Python environments for Python-backend models (Triton's ``EXECUTION_ENV_PATH``).

How Triton's Python backend uses one (python_backend ``src/pb_env.cc``, ``src/stub_launcher.cc``):
it resolves ``$$TRITON_MODEL_DIRECTORY`` in the parameter, extracts the ``.tar.gz`` with libarchive
into ``/tmp/python_env_XXXXXX/<n>`` (once per archive path and mtime), refuses the model unless
``<env>/bin/activate`` exists, then starts the stub as
``bash -c "source <env>/bin/activate && exec env LD_LIBRARY_PATH=<env>/lib:... <stub> ..."``.
The stub embeds the image's libpython (its Python version is fixed by the image), and its
interpreter finds its prefix by looking up ``python3`` on ``PATH``.

So the archive tritonkit writes is a *relocatable venv* for the target image's interpreter::

    tritonkit-env.json                 what was packed (first member: cheap to read back)
    bin/activate                       puts <env>/bin first on PATH (location-independent)
    bin/python3 -> /usr/bin/python3    the image's interpreter; pyvenv.cfg makes it a venv
    pyvenv.cfg                         home = /usr/bin, include-system-site-packages = true
    lib/pythonX.Y/site-packages/...    wheels resolved for the TARGET (cpXY, manylinux), never
                                       the build machine's interpreter

``include-system-site-packages`` keeps the image's own numpy visible; numpy is pinned to the
image's version while resolving and then left out of the archive, so a requirement can never
shadow the image's numpy with an incompatible one (the numpy 2 breakage). Archives are
content-addressed by (target Python, platform tags, image numpy, normalized requirements) and
cached under the tritonkit cache directory; the builder hard-links them into model directories.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tritonkit.errors import RepositoryError, SpecError
from tritonkit.kinds.releases import TARGETS, UNCONFIRMED_RELEASES, TritonTarget, resolve_target

__all__ = [
    "ENV_PARAMETER",
    "IMAGE_PROVIDED",
    "METADATA_NAME",
    "TARGETS",
    "UNCONFIRMED_RELEASES",
    "EnvRecipe",
    "PackedEnv",
    "PipOptions",
    "TritonTarget",
    "build_env",
    "image_recipe",
    "local_recipe",
    "model_dir_reference",
    "normalize_requirements",
    "read_metadata",
    "redact",
    "resolve_target",
    "target_recipe",
]

log = logging.getLogger(__name__)

ENV_PARAMETER = "EXECUTION_ENV_PATH"
METADATA_NAME = "tritonkit-env.json"
MODEL_DIR_VAR = "$$TRITON_MODEL_DIRECTORY"
_FORMAT = 1
_PIP_TIMEOUT_S = 900


#: Top-level modules every target image provides to Python models besides the standard library:
#: numpy and the backend's utils, plus what build.py installs with them (pip, setuptools, wheel,
#: virtualenv and virtualenv's own dependencies).
IMAGE_PROVIDED = frozenset(
    {
        "numpy", "triton_python_backend_utils",
        "pip", "setuptools", "pkg_resources", "_distutils_hack", "wheel",
        "virtualenv", "distlib", "filelock", "platformdirs",
    }
)  # fmt: skip
_IMAGE_PACKAGES = ("numpy",)  # distributions resolved against the image's pin, then left out


def normalize_requirements(raw: Any, *, where: str) -> tuple[str, ...]:
    """PEP 508 requirement strings, canonical and sorted: the same set always hashes the same."""
    if not isinstance(raw, list) or not all(isinstance(r, str) and r.strip() for r in raw):
        raise SpecError(f"{where}: 'requirements' must be a list of strings like 'pillow>=10'")
    seen: dict[str, str] = {}
    for text in raw:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise SpecError(f"{where}: requirement {text!r} is not valid: {exc}") from exc
        if req.url:
            raise SpecError(
                f"{where}: requirement {redact(text)!r} points at a URL",
                hint="name a package from an index; configure private indexes with PIP_INDEX_URL "
                "or pip.conf, which tritonkit never copies into the repository",
            )
        name = canonicalize_name(req.name)
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        spec = ",".join(sorted(str(s) for s in req.specifier))
        marker = f"; {req.marker}" if req.marker else ""
        line = f"{name}{extras}{spec}{marker}"
        if name in seen and seen[name] != line:
            raise SpecError(f"{where}: '{name}' is required twice ({seen[name]!r} and {line!r})")
        seen[name] = line
    return tuple(sorted(seen.values()))


_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s:@]+(?::[^/\s@]*)?@")


def redact(text: str) -> str:
    """``https://user:token@host`` -> ``https://****@host`` anywhere in ``text``."""
    return _CREDENTIALS.sub(lambda m: f"{m.group('scheme')}****@", text)


# ----------------------------------------------------------------------------- recipes


@dataclass(frozen=True, kw_only=True)
class EnvRecipe:
    """Everything that decides an archive's content; its digest names the archive."""

    requirements: tuple[str, ...]
    python: str  # "3.10"
    platforms: tuple[str, ...]  # pip --platform tags, best first
    interpreter: str  # what bin/python3 links to where the archive runs
    include_system: bool  # see the image's site-packages (its numpy)
    pins: tuple[str, ...]  # constraints (the image's numpy)
    bundled: tuple[str, ...]  # image packages packed too (only for local twins)
    release: str
    #: distributions the image has (a custom image): resolved against its versions, not packed
    dropped: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        data = json.dumps({"format": _FORMAT, **self.to_dict()}, sort_keys=True).encode()
        return hashlib.sha256(data).hexdigest()[:16]

    @property
    def filename(self) -> str:
        return f"pyenv-py{self.python}-{self.key}.tar.gz"

    def to_dict(self) -> dict[str, Any]:
        return {
            "requirements": list(self.requirements),
            "python": self.python,
            "platforms": list(self.platforms),
            "interpreter": self.interpreter,
            "include_system": self.include_system,
            "pins": list(self.pins),
            "bundled": list(self.bundled),
            "release": self.release,
            # only when set, so archives made before custom images keep their names
            **({"dropped": list(self.dropped)} if self.dropped else {}),
        }


def manylinux_platforms(glibc: tuple[int, int], arch: str = "x86_64") -> tuple[str, ...]:
    """Every manylinux tag a machine with ``glibc`` can load, newest first (pip wants each one)."""
    major, minor = glibc
    tags = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 4, -1)]
    tags += [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    return tuple(tags)


def target_recipe(requirements: tuple[str, ...], target: TritonTarget) -> EnvRecipe:
    """The archive that goes into the repository: for the image's interpreter and platform."""
    return EnvRecipe(
        requirements=requirements,
        python=target.python,
        platforms=manylinux_platforms(target.glibc),
        interpreter="/usr/bin/python3",
        include_system=True,
        pins=tuple(f"{p}=={target.numpy}" for p in _IMAGE_PACKAGES),
        bundled=(),
        release=target.release,
    )


def image_recipe(
    requirements: tuple[str, ...], target: TritonTarget, *, pins: tuple[str, ...], image: str
) -> EnvRecipe:
    """The archive for a custom image built on ``target``'s platform: ``pins`` (``name==version``
    of what the image has) constrain the resolution, and those distributions are left out."""
    names = tuple(sorted({str(canonicalize_name(p.partition("==")[0])) for p in pins}))
    return replace(
        target_recipe(requirements, target), pins=tuple(sorted(pins)), dropped=names, release=image
    )


@dataclass(frozen=True, kw_only=True)
class PipOptions:
    """Where the pip that packs environments finds packages: ``find_links`` (local wheel
    directories, pip's ``--find-links``) and ``no_index`` (never ask the package index), for a
    machine that cannot reach it. Not part of a recipe: the same requirements give the same
    archive wherever the wheels came from."""

    find_links: tuple[Path, ...] = ()
    no_index: bool = False

    def args(self) -> list[str]:
        out = [arg for d in self.find_links for arg in ("--find-links", str(d))]
        return out + (["--no-index"] if self.no_index else [])


def local_recipe(meta: dict[str, Any]) -> EnvRecipe:
    """A twin of a packed env for THIS interpreter (same requirements, the image's numpy packed in).

    Used by ``tritonkit serve`` when the target's Python is not the local stub's: the twin has
    only what the archive has (plus the image's numpy), never the venv tritonkit runs from, so a
    missing requirement still fails locally.
    """
    base = Path(getattr(sys, "_base_executable", sys.executable) or sys.executable).resolve()
    pins = tuple(str(p) for p in meta.get("pins", []))
    return EnvRecipe(
        requirements=tuple(str(r) for r in meta.get("requirements", [])),
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
        platforms=manylinux_platforms(_local_glibc()),
        interpreter=str(base),
        include_system=False,
        pins=pins,
        bundled=pins,
        release=f"local-twin-of-{meta.get('release', 'unknown')}",
    )


def _local_glibc() -> tuple[int, int]:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        text = ""
    name, _, version = text.partition(" ")
    parts = version.split(".")
    if name != "glibc" or len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return (2, 17)  # manylinux2014: what every glibc Linux tritonkit supports can load
    return (int(parts[0]), int(parts[1]))


# ----------------------------------------------------------------------------- building


@dataclass(frozen=True, kw_only=True)
class PackedEnv:
    """A built archive in the cache, with what it makes importable."""

    recipe: EnvRecipe
    path: Path
    modules: tuple[str, ...]
    cached: bool  # True when an earlier build had made it


def default_cache_dir() -> Path:
    """``$TRITONKIT_CACHE_DIR`` or ``$XDG_CACHE_HOME/tritonkit`` (``~/.cache/tritonkit``) + /pyenvs."""
    explicit = os.environ.get("TRITONKIT_CACHE_DIR")
    if explicit:
        return Path(explicit) / "pyenvs"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonkit" / "pyenvs"


def build_env(
    recipe: EnvRecipe, *, cache_dir: Path | None = None, where: str = "", pip: PipOptions | None = None
) -> PackedEnv:
    """The cached archive for ``recipe``, resolving and packing it first when it is new.

    Raises RepositoryError with pip's reason (credentials redacted) when a requirement cannot
    be resolved for the target. The archive appears in the cache by one rename, complete or not
    at all.
    """
    cache = cache_dir or default_cache_dir()
    archive = cache / recipe.filename
    if archive.is_file():
        meta = read_metadata(archive)
        if meta is not None and meta.get("key") == recipe.key:
            return PackedEnv(recipe=recipe, path=archive, modules=tuple(meta["modules"]), cached=True)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=cache))
    except OSError as exc:
        raise RepositoryError(
            f"cannot write the Python environment cache {cache}: {exc.strerror or exc}",
            hint="set TRITONKIT_CACHE_DIR to a writable directory",
        ) from exc
    try:
        site = work / "env" / "lib" / f"python{recipe.python}" / "site-packages"
        site.mkdir(parents=True)
        _pip_install(recipe, site, work, where=where, pip=pip or PipOptions())
        modules = _importable(site)
        meta = {"format": _FORMAT, "key": recipe.key, **recipe.to_dict(), "modules": modules}
        tmp_archive = work / recipe.filename
        _write_archive(tmp_archive, work / "env", recipe, meta)
        os.replace(tmp_archive, archive)
    except OSError as exc:
        raise RepositoryError(f"packing the Python environment failed: {exc.strerror or exc}") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("packed Python environment %s (%d bytes)", archive.name, archive.stat().st_size)
    return PackedEnv(recipe=recipe, path=archive, modules=tuple(modules), cached=False)


def _pip_install(recipe: EnvRecipe, site: Path, work: Path, *, where: str, pip: PipOptions) -> None:
    wanted = list(recipe.requirements) + [p for p in recipe.bundled if p not in recipe.requirements]
    if not wanted:
        return
    constraints = work / "constraints.txt"
    constraints.write_text("".join(f"{p}\n" for p in recipe.pins), encoding="utf-8")
    abi = "cp" + recipe.python.replace(".", "")
    cmd = [
        sys.executable, "-m", "pip", "install",
        "--target", str(site),
        "--only-binary=:all:",
        "--implementation", "cp",
        "--python-version", recipe.python,
        "--abi", abi, "--abi", "abi3", "--abi", "none",
        *[arg for tag in recipe.platforms for arg in ("--platform", tag)],
        "--constraint", str(constraints),
        "--no-compile", "--no-input", "--disable-pip-version-check", "--quiet",
        *pip.args(),
        *wanted,
    ]  # fmt: skip
    env = dict(os.environ)
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    try:
        result = subprocess.run(
            cmd, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S, check=False, env=env
        )
    except subprocess.TimeoutExpired as exc:
        raise RepositoryError(
            f"{where}: resolving {', '.join(wanted)} for Python {recipe.python} took over "
            f"{_PIP_TIMEOUT_S} s; nothing was written",
            hint="check the package index is reachable (PIP_INDEX_URL), or build offline from a "
            "wheel directory: tritonkit build --find-links DIR --no-index",
        ) from exc
    if result.returncode != 0:
        reason = _pip_reason(result.stderr or result.stdout)
        raise RepositoryError(
            f"{where}: cannot install {', '.join(wanted)} for the target (CPython {recipe.python}, "
            f"{recipe.platforms[0]}, wheels only); nothing was written.\npip says: {reason}",
            hint="pick versions that publish wheels for that Python and manylinux, or change 'target'"
            + ("; offline, the wheel directory must hold every wheel needed" if pip.no_index else ""),
        )
    if not recipe.bundled:
        for dist in (*_IMAGE_PACKAGES, *recipe.dropped):
            _remove_distribution(site, dist)


def _pip_reason(output: str) -> str:
    lines = [redact(line.rstrip()) for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return "\n  ".join((errors or lines)[-6:]) or "(no output)"


def _remove_distribution(site: Path, name: str) -> None:
    """Drop a distribution pip installed (the image provides it), with its files and metadata."""
    canon = canonicalize_name(name)
    for info in list(site.glob("*.dist-info")):
        dist = canonicalize_name(info.name.removesuffix(".dist-info").rsplit("-", 1)[0])
        if dist != canon:
            continue
        for top in _top_levels(info):
            for path in (site / top, site / f"{top}.py", site / f"{top}.libs"):
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
        shutil.rmtree(info)
    if (site / "bin").is_dir() and not any((site / "bin").iterdir()):
        (site / "bin").rmdir()


def _top_levels(info: Path) -> list[str]:
    top = info / "top_level.txt"
    if top.is_file():
        return [t.strip() for t in top.read_text(encoding="utf-8").splitlines() if t.strip()]
    record = info / "RECORD"
    names: set[str] = set()
    if record.is_file():
        for line in record.read_text(encoding="utf-8").splitlines():
            first = line.split(",", 1)[0].split("/", 1)[0]
            if first and not first.endswith((".dist-info", ".data")) and first != "..":
                names.add(first[:-3] if first.endswith(".py") else first)
    return sorted(names)


def _importable(site: Path) -> list[str]:
    """Top-level module names ``import`` can find in ``site``."""
    names: set[str] = set()
    for child in site.iterdir():
        if child.name.endswith((".dist-info", ".data", ".libs")) or child.name in ("bin", "__pycache__"):
            continue
        if child.is_dir() and child.name.isidentifier():
            names.add(child.name)
        elif child.suffix == ".py" and child.stem.isidentifier():
            names.add(child.stem)
        elif child.suffix == ".so":
            names.add(child.name.split(".", 1)[0])
        elif child.suffix == ".pth":
            continue
    return sorted(names)


def _activate_script() -> str:
    # Sourced by Triton with bash (`source <env>/bin/activate && exec ... stub`): the env's own
    # location comes from BASH_SOURCE, so the archive works wherever Triton extracts it.
    return (
        "# Written by tritonkit: a relocatable activate for Triton's EXECUTION_ENV_PATH.\n"
        'VIRTUAL_ENV="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"\n'
        "export VIRTUAL_ENV\n"
        'export PATH="$VIRTUAL_ENV/bin:$PATH"\n'
        "unset PYTHONHOME\n"
    )


def _write_archive(path: Path, root: Path, recipe: EnvRecipe, meta: dict[str, Any]) -> None:
    home = str(Path(recipe.interpreter).parent)
    include = "true" if recipe.include_system else "false"
    generated = {
        "bin/activate": _activate_script().encode(),
        "pyvenv.cfg": (
            f"home = {home}\ninclude-system-site-packages = {include}\nversion = {recipe.python}\n"
        ).encode(),
    }
    with tarfile.open(path, "w:gz", compresslevel=6) as tar:
        _add_bytes(tar, METADATA_NAME, json.dumps(meta, indent=2, sort_keys=True).encode())
        for name, data in generated.items():
            _add_bytes(tar, name, data, mode=0o755 if name.startswith("bin/") else 0o644)
        link = tarfile.TarInfo("bin/python3")
        link.type = tarfile.SYMTYPE
        link.linkname = recipe.interpreter
        tar.addfile(link)
        for file in sorted(root.rglob("*")):
            rel = file.relative_to(root).as_posix()
            if "__pycache__" in file.parts:
                continue
            info = tar.gettarinfo(str(file), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if info.isreg():
                with file.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, *, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def read_metadata(archive: Path) -> dict[str, Any] | None:
    """tritonkit's record of a packed archive (its first member), or None for any other archive."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            first = tar.next()
            if first is None or first.name != METADATA_NAME or not first.isreg():
                return None
            handle = tar.extractfile(first)
            if handle is None:
                return None
            data = json.loads(handle.read().decode("utf-8"))
    except (OSError, tarfile.TarError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("format") == _FORMAT else None


def archive_modules(archive: Path) -> frozenset[str] | None:
    """Top-level modules an EXECUTION_ENV_PATH archive provides (None: unreadable archive)."""
    meta = read_metadata(archive)
    if meta is not None:
        return frozenset(str(m) for m in meta.get("modules", []))
    names: set[str] = set()
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                parts = member.name.lstrip("./").split("/")
                if "site-packages" in parts:
                    i = parts.index("site-packages")
                    if len(parts) > i + 1:
                        top = parts[i + 1]
                        if top.endswith(".py"):
                            top = top[:-3]
                        names.add(top.split(".", 1)[0])
    except (OSError, tarfile.TarError):
        return None
    return frozenset(n for n in names if n.isidentifier())


def model_dir_reference(filename: str) -> str:
    """The EXECUTION_ENV_PATH value for an archive kept in the model's own directory."""
    return f"{MODEL_DIR_VAR}/{filename}"


def resolve_env_path(value: str, model_dir: Path) -> Path | None:
    """Where an EXECUTION_ENV_PATH value points on this machine (None when it cannot be known)."""
    if MODEL_DIR_VAR in value:
        return Path(value.replace(MODEL_DIR_VAR, str(model_dir)))
    path = Path(value)
    return path if path.is_absolute() else None


def link_into(archive: Path, dest: Path) -> None:
    """Put the cached archive at ``dest``: a hard link (no copy) where the filesystem allows."""
    try:
        os.link(archive, dest)
    except OSError:
        shutil.copyfile(archive, dest)
