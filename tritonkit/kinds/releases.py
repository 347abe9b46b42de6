"""The release catalog: what each NGC ``tritonserver:<release>`` image holds, with its sources.

One module for every release table: the ``-py3`` image (Triton, Python, numpy, glibc: what a
packed Python environment must match), the ``-vllm-python-py3`` image (its vLLM) and the
``-trtllm-python-py3`` image (its TensorRT-LLM). The spec, the build, the validator, the server
and deploy read releases here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from packaging.version import InvalidVersion, Version

from tritonkit.errors import SpecError

__all__ = [
    "TARGETS",
    "TRTLLM_IMAGE",
    "TRTLLM_RELEASES",
    "UNCONFIRMED_RELEASES",
    "VLLM_IMAGE",
    "VLLM_RELEASES",
    "TritonTarget",
    "TrtllmRelease",
    "VllmRelease",
    "resolve_target",
    "resolve_vllm_target",
    "same_trtllm_release",
    "trtllm_image",
    "trtllm_release",
    "vllm_image",
]

# ------------------------------------------------------------------ the py3 image (Python models)


@dataclass(frozen=True, kw_only=True)
class TritonTarget:
    """One NGC ``nvcr.io/nvidia/tritonserver:<release>-py3`` image, as far as Python stages care.

    ``source`` names where each fact of the row comes from; ``unconfirmed`` lists the fields that
    source does not state (kept at the value the sibling releases have, and said so).
    """

    release: str
    triton: str  # Triton server version inside the image
    python: str  # the image's /usr/bin/python3, which its Python-backend stub embeds
    numpy: str  # preinstalled by the image's Python backend
    glibc: tuple[int, int]  # of the image's Ubuntu: the newest manylinux tag its wheels may use
    source: str
    unconfirmed: tuple[str, ...] = ()


# Sources, checked through the documentation index (2026-11). The py3 images' own release-notes
# pages could be read only without their contents list, except 24.12's archived copy; the Python
# of the other rows is that of the same release's trtllm/vllm images in Triton's compatibility
# matrix (where the two disagree, the release is left out: UNCONFIRMED_RELEASES).
_NOTES = "NVIDIA, Triton Inference Server Release Notes, rel-{}.html"
# https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-YY-MM.html
_NOTES_2412 = (
    "NVIDIA, 'Triton Inference Server Release 24.12' (docs.nvidia.com/deeplearning/"
    "triton-inference-server/archives/triton-inference-server-2530/user-guide/docs/introduction/"
    "release_notes.html): 'Ubuntu 24.04 including Python 3.12', Triton 2.53"
)
_MATRIX = (
    "Triton 'Release Compatibility Matrix' (triton-inference-server/server docs/introduction/"
    "compatibility.md): Python {} in this release's {}"
)
_BUILD = (
    "triton-inference-server/server build.py (2.56.0dev = container 25.03dev): the Python backend "
    "image gets apt python3/python3-pip/python3-setuptools/python3-wheel and pip 'numpy<2' virtualenv"
)
_UBUNTU = "glibc of the Ubuntu whose python3 that is (22.04: Python 3.10.12, glibc 2.35; 24.04: 3.12.3, 2.39)"
_NUMPY = "numpy 1.26.4 is the newest release matching build.py's 'numpy<2'"
_NUMPY_ASSUMED = "numpy: not stated by these sources, 1.26.4 assumed as for 25.03 (build.py 'numpy<2')"


def _row(release: str, triton: str, python: str, *, cite: str, unconfirmed: tuple[str, ...]) -> TritonTarget:
    glibc = (2, 35) if python == "3.10" else (2, 39)
    return TritonTarget(
        release=release,
        triton=triton,
        python=python,
        numpy="1.26.4",
        glibc=glibc,
        source=f"{_NOTES.format(release.replace('.', '-'))}; {cite}; {_UBUNTU}; "
        + (_NUMPY_ASSUMED if "numpy" in unconfirmed else _NUMPY),
        unconfirmed=unconfirmed,
    )


_SIBLINGS = "trtllm-python-py3 and vllm-python-py3 images"
_PY310 = _MATRIX.format("3.10.12", _SIBLINGS)
_PY312 = _MATRIX.format("3.12.3", _SIBLINGS)
_PY312_VLLM = _MATRIX.format("3.12.3", "vllm-python-py3 image (the newest row)")
# Triton versions: confirmed 24.05 = 2.46.0 and 24.12 = 2.53.0 (release notes), 24.09 = 2.50.0
# (TensorRT-LLM backend README), 25.01 = 2.54 (docs archive triton-inference-server-2540),
# 25.03 = 2.56 (build.py), 25.06 = 2.59.0 (GitHub release "Release 2.59.0 corresponding to NGC
# container 25.06"); one minor version a month in between. After 25.06 the same monthly numbering
# is assumed, not confirmed. The numpy pin is confirmed only for the build.py read (25.03); the
# other rows keep 1.26.4 and say so. No release's py3 notes gave its numpy version.
_LATER = ("triton", "numpy")
TARGETS: dict[str, TritonTarget] = {
    t.release: t
    for t in (
        _row("24.05", "2.46.0", "3.10", cite=_PY310, unconfirmed=("numpy",)),
        _row("24.06", "2.47.0", "3.10", cite=_PY310, unconfirmed=("numpy",)),
        _row("24.07", "2.48.0", "3.10", cite=_PY310, unconfirmed=("numpy",)),
        _row("24.08", "2.49.0", "3.10", cite=_PY310, unconfirmed=("numpy",)),
        _row("24.09", "2.50.0", "3.10", cite=_PY310, unconfirmed=("numpy",)),
        _row("24.10", "2.51.0", "3.10", cite=_PY310, unconfirmed=("numpy",)),
        # 24.11 is left out: see UNCONFIRMED_RELEASES.
        _row("24.12", "2.53.0", "3.12", cite=_NOTES_2412, unconfirmed=("numpy",)),
        _row("25.01", "2.54.0", "3.12", cite=_PY312, unconfirmed=("numpy",)),
        _row("25.02", "2.55.0", "3.12", cite=_PY312, unconfirmed=("numpy",)),
        _row("25.03", "2.56.0", "3.12", cite=f"{_PY312}; {_BUILD}", unconfirmed=()),
        _row("25.04", "2.57.0", "3.12", cite=_PY312, unconfirmed=("numpy",)),
        _row("25.05", "2.58.0", "3.12", cite=_PY312, unconfirmed=("numpy",)),
        _row("25.06", "2.59.0", "3.12", cite=_PY312, unconfirmed=("numpy",)),
        _row("25.07", "2.60.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("25.08", "2.61.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("25.09", "2.62.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("25.10", "2.63.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("25.11", "2.64.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("25.12", "2.65.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("26.01", "2.66.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("26.02", "2.67.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("26.03", "2.68.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("26.04", "2.69.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("26.05", "2.70.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("26.06", "2.71.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("26.07", "2.72.0", "3.12", cite=_PY312, unconfirmed=_LATER),
        _row("26.08", "2.73.0", "3.12", cite=_PY312_VLLM, unconfirmed=_LATER),
    )
}

#: Releases refused as targets because the sources disagree on a fact that decides the wheels.
UNCONFIRMED_RELEASES: dict[str, str] = {
    "24.11": (
        "the sources available disagree on its Python: the compatibility matrix gives its "
        "trtllm-python-py3 image Python 3.10.12 and its vllm-python-py3 image 3.12.3, and the py3 "
        "image's own notes do not say; pick 24.10 (3.10) or 24.12 (3.12), or check "
        "`python3 --version` in the image and use the release whose Python matches"
    ),
}


def resolve_target(release: Any, *, where: str) -> TritonTarget:
    """The table row for ``release`` ("24.10"); SpecError listing the known ones otherwise."""
    key = str(release).strip()
    target = TARGETS.get(key)
    if target is None and key in UNCONFIRMED_RELEASES:
        raise SpecError(
            f"{where}: Triton release {key!r} is not offered as a target",
            hint=UNCONFIRMED_RELEASES[key],
        )
    if target is None:
        raise SpecError(
            f"{where}: unknown Triton release {key!r} for 'target'",
            hint=f"use one of {', '.join(sorted(TARGETS))} (NGC tritonserver image tags)",
        )
    return target


# ------------------------------------------------------------------ the vLLM image

#: NVIDIA's image tag for a release's vLLM container
VLLM_IMAGE = "nvcr.io/nvidia/tritonserver:{release}-vllm-python-py3"

# Triton's "Release Compatibility Matrix", section "Container Name: vllm-python-py3"
# (triton-inference-server/server docs/introduction/compatibility.md at commit 0f963c9a8c69,
# read 2026-11 through the documentation index). The "vLLM version" column, as printed there
# ("0.5.0 post1" is written 0.5.0.post1 here); NVIDIA's local build suffix after '+' is kept in
# ``build``. Rows 24.04-24.08 are also in the older docs/compatibility.md of the same repository.
_SOURCE = (
    "Triton 'Release Compatibility Matrix' (triton-inference-server/server "
    "docs/introduction/compatibility.md, section 'Container Name: vllm-python-py3')"
)


@dataclass(frozen=True, kw_only=True)
class VllmRelease:
    release: str  # NGC tag, "24.10"
    vllm: str  # vLLM's public version, "0.5.5"
    build: str  # as the source prints it, NVIDIA's build suffix included
    python: str  # the image's Python
    source: str = _SOURCE

    @property
    def image(self) -> str:
        return vllm_image(self.release)

    @property
    def vllm_tuple(self) -> tuple[int, ...]:
        """(major, minor, patch[, 4th]) of ``vllm``, for comparisons."""
        return tuple(int(x) for x in re.findall(r"\d+", self.vllm.split(".post")[0].split("rc")[0]))


def _rows(*rows: tuple[str, str, str, str]) -> Mapping[str, VllmRelease]:
    return MappingProxyType({r: VllmRelease(release=r, vllm=v, build=b, python=p) for r, v, b, p in rows})


#: release -> the vLLM its -vllm-python-py3 image ships
VLLM_RELEASES: Mapping[str, VllmRelease] = _rows(
    ("24.04", "0.4.0.post1", "0.4.0 post1", "3.10.12"),
    ("24.05", "0.4.0.post1", "0.4.0 post1", "3.10.12"),
    ("24.06", "0.4.3", "0.4.3", "3.10.12"),
    ("24.07", "0.5.0.post1", "0.5.0 post1", "3.10.12"),
    ("24.08", "0.5.0.post1", "0.5.0 post1", "3.10.12"),
    ("24.09", "0.5.3.post1", "0.5.3.post1", "3.10.12"),
    ("24.10", "0.5.5", "0.5.5", "3.10.12"),
    ("24.11", "0.5.5", "0.5.5", "3.12.3"),
    ("24.12", "0.5.5", "0.5.5", "3.12.3"),
    ("25.01", "0.6.3.post1", "0.6.3.post1", "3.12.3"),
    ("25.02", "0.7.0", "0.7.0+5e800e3d.nv25.2.cu128", "3.12.3"),
    ("25.03", "0.7.3", "0.7.3+04de634a.nv25.3.cu128", "3.12.3"),
    ("25.04", "0.8.1", "0.8.1+5f4af9e0.nv25.4.cu129", "3.12.3"),
    ("25.05", "0.8.4", "0.8.4+dc1a3e10.nv25.5.cu129", "3.12.3"),
    ("25.06", "0.9.0rc1", "0.9.0rc1+1958ee56.nv25.6.cu129", "3.12.3"),
    ("25.07", "0.9.0rc1", "0.9.0rc1+1958ee56.nv25.6.cu129", "3.12.3"),
    ("25.08", "0.9.2", "0.9.2+4ef1e343.nv25.8.post1.cu130", "3.12.3"),
    ("25.09", "0.10.1.1", "0.10.1.1+381074ae.nv25.9.cu130", "3.12.3"),
    ("25.10", "0.10.2", "0.10.2+9dd9ca32.nv25.10.cu130", "3.12.3"),
    ("25.11", "0.11.0", "0.11.0+582e4e37.nv25.11.cu130", "3.12.3"),
    ("25.12", "0.11.1", "0.11.1+9114fd76.nv25.12.cu131", "3.12.3"),
    ("26.01", "0.13.0", "0.13.0+faa43dbf.nv26.1.cu131", "3.12.3"),
    ("26.02", "0.15.1", "0.15.1+nv26.2", "3.12.3"),
    ("26.03", "0.17.1", "0.17.1+fb2e3ab6.nv26.3.46332470.cu132", "3.12.3"),
    ("26.04", "0.19.0", "0.19.0+6bc3197f.nv26.04.48761268", "3.12.3"),
    ("26.05", "0.19.0", "0.19.0+6bc3197f.nv26.04.48761268", "3.12.3"),
    ("26.06", "0.22.1", "0.22.1+7b9cb5b7.nv26.6.55098374", "3.12.3"),
    ("26.07", "0.24.0", "0.24.0+092c4842.nv26.7.57386851", "3.12.3"),
    ("26.08", "0.27.1", "0.27.1+b1082979.nv26.8.62699174", "3.12.3"),
)


def vllm_image(release: str) -> str:
    """NVIDIA's vLLM image for ``release`` ("24.10" -> nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3)."""
    return VLLM_IMAGE.format(release=release)


def resolve_vllm_target(release: Any, *, where: str) -> str:
    """``release`` when NVIDIA publishes a vLLM image for it; SpecError listing them otherwise."""
    key = str(release).strip()
    if key not in VLLM_RELEASES:
        raise SpecError(
            f"{where}: no -vllm-python-py3 image is known for release {key!r}",
            hint=f'use one of {", ".join(VLLM_RELEASES)} (quote it in YAML: target: "24.10")',
        )
    return key


# ------------------------------------------------------------------ the TensorRT-LLM image


@dataclass(frozen=True)
class TrtllmRelease:
    """TensorRT-LLM inside ``nvcr.io/nvidia/tritonserver:<release>-trtllm-python-py3``."""

    release: str
    trtllm: str
    source: str


_COMPAT = (
    "Triton Release Compatibility Matrix, 'Container Name: trtllm-python-py3' "
    "(triton-inference-server/server docs/introduction/compatibility.md; "
    "docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/introduction/compatibility.html)"
)
#: release -> TensorRT-LLM version, every row from NVIDIA's compatibility matrix (_COMPAT).
TRTLLM_RELEASES: dict[str, TrtllmRelease] = {
    r: TrtllmRelease(r, v, _COMPAT)
    for r, v in (
        ("24.04", "0.9.0"), ("24.05", "0.9.0"), ("24.06", "0.10.0"), ("24.07", "0.11.0"),
        ("24.08", "0.12.0"), ("24.09", "0.13.0"), ("24.10", "0.14.0"), ("24.11", "0.15.0"),
        ("24.12", "0.16.0"), ("25.01", "0.17.0"), ("25.02", "0.17.0.post1"), ("25.03", "0.18.0"),
        ("25.04", "0.18.2"), ("25.05", "0.19.0"), ("25.06", "0.20.0"), ("25.07", "0.20.0"),
        ("25.08", "0.21.0"), ("25.09", "1.0.0"), ("25.10", "1.0.0"), ("25.11", "1.0.3.2510"),
        ("25.12", "1.1.0"), ("26.01", "1.1.0"), ("26.02", "1.1.0"), ("26.03", "1.2.0"),
        ("26.04", "1.2.1"), ("26.05", "1.2.1"), ("26.06", "1.2.1"), ("26.07", "1.2.1"),
    )
}  # fmt: skip


def trtllm_release(release: str) -> TrtllmRelease | None:
    return TRTLLM_RELEASES.get(release)


#: NVIDIA's image tag for a release's TensorRT-LLM container
TRTLLM_IMAGE = "nvcr.io/nvidia/tritonserver:{release}-trtllm-python-py3"


def trtllm_image(release: str) -> str:
    """NVIDIA's Triton image with the TensorRT-LLM backend for ``release``."""
    return TRTLLM_IMAGE.format(release=release)


def same_trtllm_release(engine: str, runtime: str) -> bool | None:
    """Whether an engine built by TensorRT-LLM ``engine`` loads on ``runtime`` (same
    major.minor.patch: engines are not portable across TensorRT-LLM releases); None: unparsable."""
    try:
        a, b = Version(engine), Version(runtime)
    except InvalidVersion:
        return None
    return a.release[:3] == b.release[:3]
