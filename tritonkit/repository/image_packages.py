"""What the serving image gives a Python model to import: the validator's *target*.

A Python-backend model's imports come from the image's interpreter (its standard library and
the packages installed in the image), its packed environment, or its own directory. tritonkit can
only judge the first part when it knows the image:

- a stock NGC release (``--target 24.10``, or the target ``tritonkit build`` recorded):
  the standard library of the release's Python plus what every tritonserver image installs
  for the Python backend (:data:`tritonkit.repository.execution_env.IMAGE_PROVIDED`);
- a custom image declared by its ``pip freeze`` (``--image-requirements FILE``): those
  distributions, mapped to the top-level modules they install;
- nothing known (a repository tritonkit did not build): no verdict, only a warning.

Distribution -> import names: the distribution's own ``top_level`` record where it is installed
here (``importlib.metadata``), else :data:`KNOWN_TOP_LEVEL` (the distributions whose import name
differs from their name), else the name itself with ``-`` read as ``_``.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tritonkit.errors import SpecError
from tritonkit.repository import execution_env

__all__ = [
    "KNOWN_TOP_LEVEL",
    "ImageTarget",
    "distribution_for",
    "load_image_requirements",
    "read_freeze",
    "release_target",
    "stdlib_modules",
    "stock_image_target",
    "target_from_distributions",
]

#: Distributions whose top-level import names differ from their names (canonical name -> modules).
#: Used when the distribution is not installed where tritonkit runs, so its own record is not
#: readable. Keep it to well-known, stable mappings.
KNOWN_TOP_LEVEL: dict[str, tuple[str, ...]] = {
    "opencv-python": ("cv2",),
    "opencv-python-headless": ("cv2",),
    "opencv-contrib-python": ("cv2",),
    "opencv-contrib-python-headless": ("cv2",),
    "pillow": ("PIL",),
    "pillow-simd": ("PIL",),
    "scikit-learn": ("sklearn",),
    "scikit-image": ("skimage",),
    "pyyaml": ("yaml", "_yaml"),
    "ruamel-yaml": ("ruamel",),
    "protobuf": ("google",),
    "googleapis-common-protos": ("google",),
    "grpcio": ("grpc",),
    "grpcio-tools": ("grpc_tools",),
    "attrs": ("attr", "attrs"),
    "beautifulsoup4": ("bs4",),
    "python-dateutil": ("dateutil",),
    "python-dotenv": ("dotenv",),
    "python-docx": ("docx",),
    "python-magic": ("magic",),
    "python-multipart": ("multipart",),
    "pyjwt": ("jwt",),
    "pycryptodome": ("Crypto",),
    "pycryptodomex": ("Cryptodome",),
    "pyopenssl": ("OpenSSL",),
    "pyserial": ("serial",),
    "pyzmq": ("zmq",),
    "gitpython": ("git",),
    "pymupdf": ("fitz", "pymupdf"),
    "pywavelets": ("pywt",),
    "websocket-client": ("websocket",),
    "faiss-cpu": ("faiss",),
    "faiss-gpu": ("faiss",),
    "onnxruntime-gpu": ("onnxruntime",),
    "onnxruntime-openvino": ("onnxruntime",),
    "tensorflow-cpu": ("tensorflow",),
    "tensorflow-gpu": ("tensorflow",),
    "tf-nightly": ("tensorflow",),
    "paddlepaddle": ("paddle",),
    "paddlepaddle-gpu": ("paddle",),
    "cupy-cuda11x": ("cupy", "cupyx"),
    "cupy-cuda12x": ("cupy", "cupyx"),
    "setuptools": ("setuptools", "pkg_resources", "_distutils_hack"),
    "python-levenshtein": ("Levenshtein",),
    "levenshtein": ("Levenshtein",),
    "msgpack-python": ("msgpack",),
    "nvidia-dali-cuda110": ("nvidia",),
    "nvidia-dali-cuda120": ("nvidia",),
}

#: Distribution-name prefixes of namespace packages (``google-cloud-storage`` -> ``google.cloud``).
_NAMESPACES = {"google-": "google", "azure-": "azure", "nvidia-": "nvidia", "backports-": "backports"}

#: Import name -> the distribution to put in ``requirements:`` (the fix a message suggests).
_PREFERRED: dict[str, str] = {
    "cv2": "opencv-python-headless",  # no GUI libraries: what a server image can load
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "yaml": "pyyaml",
    "google": "protobuf",
    "grpc": "grpcio",
    "attr": "attrs",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "dotenv": "python-dotenv",
    "docx": "python-docx",
    "jwt": "pyjwt",
    "Crypto": "pycryptodome",
    "OpenSSL": "pyopenssl",
    "serial": "pyserial",
    "zmq": "pyzmq",
    "git": "gitpython",
    "fitz": "pymupdf",
    "pywt": "pywavelets",
    "faiss": "faiss-cpu",
    "paddle": "paddlepaddle",
    "cupy": "cupy-cuda12x",
    "pkg_resources": "setuptools",
    "Levenshtein": "levenshtein",
}

# Standard-library top-level modules that exist only in some Python versions (``sys``'s list is
# the running interpreter's). distutils is left out on purpose: removed in 3.12, but
# setuptools, which tritonserver images install, puts an importable ``distutils`` back.
_ADDED = {"tomllib": (3, 11)}
_REMOVED_IN = {
    **dict.fromkeys(("imp", "asynchat", "asyncore", "smtpd"), (3, 12)),
    **dict.fromkeys(
        (
            "aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "lib2to3", "mailcap",
            "msilib", "nis", "nntplib", "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau",
            "telnetlib", "uu", "xdrlib",
        ),
        (3, 13),
    ),
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ImageTarget:
    """The serving image as far as a Python model's imports are concerned.

    ``provided``: top-level modules beyond the standard library; ``python`` ("3.10") decides the
    standard library, None when unknown (then any version's standard library is accepted).
    """

    description: str  # "tritonserver 24.10 (nvcr.io/nvidia/tritonserver:24.10-py3, Python 3.10)"
    python: str | None
    provided: frozenset[str]
    release: str | None = None
    custom: bool = False  # declared by --image-requirements (the fix differs)

    def stdlib(self) -> frozenset[str]:
        return stdlib_modules(self.python)


def release_target(release: object, *, where: str = "--target") -> ImageTarget:
    """A stock ``nvcr.io/nvidia/tritonserver:<release>-py3`` image; SpecError for an unknown release."""
    row = execution_env.resolve_target(release, where=where)
    return ImageTarget(
        description=(
            f"tritonserver {row.release} (nvcr.io/nvidia/tritonserver:{row.release}-py3, Python {row.python})"
        ),
        python=row.python,
        provided=execution_env.IMAGE_PROVIDED,
        release=row.release,
    )


def stock_image_target(description: str) -> ImageTarget:
    """A stock tritonserver image whose release tritonkit does not know (any Python)."""
    return ImageTarget(description=description, python=None, provided=execution_env.IMAGE_PROVIDED)


_OPTION = re.compile(r"^-{1,2}[A-Za-z]")
_EGG = re.compile(r"[#&]egg=(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)")


def load_image_requirements(path: str | Path, *, base: ImageTarget | None = None) -> ImageTarget:
    """The image a ``pip freeze`` (or requirements-style) file describes.

    ``base`` (an NGC release the image is built on) gives the Python version; what the file lists
    is what the image provides (plus ``triton_python_backend_utils``, which the backend, not pip,
    installs). Raises SpecError, naming the file and line, for an unreadable file or line.
    """
    file = Path(path)
    dists = dict(read_freeze(file))
    on = f" on tritonserver {base.release}" if base is not None and base.release else ""
    return target_from_distributions(
        dists,
        description=f"the image described by {file} ({len(dists)} distributions{on})",
        python=base.python if base is not None else None,
        release=base.release if base is not None else None,
    )


def target_from_distributions(
    distributions: Mapping[str, str], *, description: str, python: str | None, release: str | None
) -> ImageTarget:
    """A custom image that has ``distributions`` installed (name -> version)."""
    # triton_python_backend_utils is installed by the backend, not pip, and imports numpy: any
    # image that runs the Python backend has both, listed or not.
    provided: set[str] = set(execution_env.IMAGE_PROVIDED)
    for name in distributions:
        provided |= top_level_names(name)
    return ImageTarget(
        description=description, python=python, provided=frozenset(provided), release=release, custom=True
    )


def read_freeze(path: Path, *, option: str = "--image-requirements") -> list[tuple[str, str]]:
    """(distribution, version) per line of a ``pip freeze`` or requirements file (version "" when
    the line pins none). SpecError, naming the file and line, for what cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError(
            f"{option} {path}: cannot read it ({reason})",
            hint="pass a text file with the image's `pip freeze` output",
        ) from exc
    out: list[tuple[str, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        egg = _EGG.search(line)
        if _OPTION.match(line):
            if egg is None:
                continue  # --index-url, -r other.txt, --hash...: not a package the image has
            out.append((egg.group("name"), ""))
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise SpecError(
                f"{path}:{number}: {raw.strip()!r} is not a requirement line ({exc})",
                hint="pass what `pip freeze` prints when run inside the image",
            ) from exc
        pinned = [s.version for s in req.specifier if s.operator in ("==", "===")]
        out.append((req.name, pinned[0] if pinned else ""))
    return out


def top_level_names(distribution: str) -> frozenset[str]:
    """Top-level modules ``distribution`` installs (see the module docstring for how)."""
    canon = canonicalize_name(distribution)
    names = set(_installed_top_levels().get(canon, ()))
    names |= set(KNOWN_TOP_LEVEL.get(canon, ()))
    names |= {ns for prefix, ns in _NAMESPACES.items() if canon.startswith(prefix)}
    names.add(canon.replace("-", "_").replace(".", "_"))
    names.add(distribution.replace("-", "_").replace(".", "_"))
    return frozenset(n for n in names if n.isidentifier())


@cache
def _installed_top_levels() -> dict[str, tuple[str, ...]]:
    """Canonical distribution name -> top-level modules, for what is installed where tritonkit runs."""
    out: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            out.setdefault(canonicalize_name(dist), set()).add(module)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def distribution_for(module: str) -> str:
    """The distribution to add to ``requirements:`` for an import of ``module`` (a good guess)."""
    if module in _PREFERRED:
        return _PREFERRED[module]
    for dist, modules in _installed_top_levels().items():
        if module in modules:
            return dist
    return module.replace("_", "-")


@cache
def stdlib_modules(python: str | None) -> frozenset[str]:
    """Top-level standard-library modules of CPython ``python`` ("3.10"); every version's for None."""
    names = set(sys.stdlib_module_names) | set(_ADDED) | set(_REMOVED_IN) | {"__future__"}
    if python is None:
        return frozenset(names)
    major, _, minor = python.partition(".")
    version = (int(major), int(minor))
    names -= {m for m, since in _ADDED.items() if version < since}
    names -= {m for m, gone in _REMOVED_IN.items() if version >= gone}
    return frozenset(names)
