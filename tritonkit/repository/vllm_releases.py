"""Which vLLM each NGC ``tritonserver:<release>-vllm-python-py3`` image ships, with its source.

Kept apart from ``image.py``'s py3 table: the vLLM image is a sibling image with its own
contents, and a vLLM stage's ``target`` names that image. Used by the spec (``target:`` of a
vLLM stage), the validator (engine arguments that vLLM version knows) and the AKS deploy (the
image to run).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tritonkit.errors import SpecError

__all__ = [
    "VLLM_IMAGE",
    "VLLM_RELEASES",
    "EngineArgNames",
    "VllmRelease",
    "engine_arg_names",
    "resolve_vllm_target",
    "vllm_image",
]

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


_ENGINE_ARGS_FILE = Path(__file__).with_name("vllm_engine_args.json")


@dataclass(frozen=True, kw_only=True)
class EngineArgNames:
    """The keys ``AsyncEngineArgs(**model.json)`` accepts in one vLLM version, and where that
    was read (the wheel and its sha256; see scripts/vllm_engine_args.py)."""

    vllm: str
    names: frozenset[str]
    source: str


@functools.cache
def _engine_args_data() -> Mapping[str, Any]:
    data: Mapping[str, Any] = json.loads(_ENGINE_ARGS_FILE.read_text(encoding="utf-8"))
    return data


def engine_arg_names(vllm_version: str | None = None) -> dict[str, EngineArgNames]:
    """vLLM version -> its engine argument names (only ``vllm_version`` when given; empty
    when that version's names were not recorded, e.g. NVIDIA's 0.9.0rc1 build, not on PyPI)."""
    data = _engine_args_data()
    out: dict[str, EngineArgNames] = {}
    for version in sorted(data["versions"], key=_version_key):
        row = data["versions"][version]
        if vllm_version is not None and version != vllm_version:
            continue
        out[version] = EngineArgNames(
            vllm=version,
            names=frozenset(row["names"]),
            source=f"{data['source']}: {row['wheel']} (sha256 {row['sha256'][:12]}...)",
        )
    return out


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))
