"""The ownership manifest: which spec built which models of a repository.

Kept as a top-level *file* (``.tritonkit-manifest.json``), which Triton ignores: it only
treats sub-directories of a repository as models.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonkit.config import atomic_write_text
from tritonkit.errors import RepositoryError

__all__ = ["MANIFEST_NAME", "Manifest"]

MANIFEST_NAME = ".tritonkit-manifest.json"
_FORMAT = 1


@dataclass
class Manifest:
    """spec name -> {"source": spec path, "models": [model names]}."""

    specs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, repo: Path) -> Manifest:
        path = repo / MANIFEST_NAME
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            specs = data["specs"]
            if not isinstance(specs, dict):
                raise TypeError("specs is not an object")
            for value in specs.values():
                if not isinstance(value.get("models"), list):
                    raise TypeError("models is not a list")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RepositoryError(
                f"{path}: the tritonkit ownership manifest is unreadable ({exc})",
                hint=f"delete {path} and rebuild each spec with --force",
            ) from exc
        return cls(specs=specs)

    def owner(self, model: str) -> str | None:
        for spec, value in self.specs.items():
            if model in value["models"]:
                return spec
        return None

    def models_of(self, spec: str) -> list[str]:
        return list(self.specs.get(spec, {}).get("models", []))

    def assign(self, spec: str, source: str, models: list[str]) -> None:
        for other, value in self.specs.items():
            if other != spec:
                value["models"] = [m for m in value["models"] if m not in models]
        self.specs = {k: v for k, v in self.specs.items() if v["models"] or k == spec}
        self.specs[spec] = {"source": source, "models": sorted(models)}

    def dumps(self) -> str:
        return json.dumps({"format": _FORMAT, "specs": dict(sorted(self.specs.items()))}, indent=2) + "\n"

    def write(self, repo: Path) -> None:
        atomic_write_text(repo / MANIFEST_NAME, self.dumps())
