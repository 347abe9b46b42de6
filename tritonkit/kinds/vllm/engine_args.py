"""The engine arguments each vLLM version accepts (read from its wheel; see scripts/vllm_engine_args.py).

The vLLM release table itself (which vLLM each ``-vllm-python-py3`` image ships) is in
:mod:`tritonkit.kinds.releases`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EngineArgNames", "engine_arg_names"]

_ENGINE_ARGS_FILE = Path(__file__).with_name("engine_args.json")


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
