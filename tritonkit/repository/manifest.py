"""The ownership manifest: which spec built which models of a repository, for which image.

Kept as a top-level *file* (``.tritonkit-manifest.json``), which Triton ignores: it only
treats sub-directories of a repository as models. Each spec's entry also records the NGC release
its Python models were built for (``targets``), so ``tritonkit validate`` and ``deploy`` judge
their imports against that image without being told.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
    """spec name -> {"source": spec path, "models": [model names], "targets": {model: release},
    "serving_root": the repository's path in the serving container (specs with vLLM stages),
    "bls_external": {model: [names its BLS calls may use from another repository]}}."""

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

    def target_of(self, model: str) -> str | None:
        """The NGC release ``tritonkit build`` made ``model`` for (None: not recorded)."""
        spec = self.owner(model)
        targets = self.specs[spec].get("targets") if spec is not None else None
        value = targets.get(model) if isinstance(targets, dict) else None
        return value if isinstance(value, str) else None

    def image_of(self, model: str) -> dict[str, Any] | None:
        """The custom image (spec key ``image:``) ``model``'s spec was built for, as recorded."""
        spec = self.owner(model)
        value = self.specs[spec].get("image") if spec is not None else None
        return dict(value) if isinstance(value, dict) else None

    def images(self) -> list[str]:
        """The names of the custom images the repository's specs were built for."""
        return sorted(
            {str(v["image"]["name"]) for v in self.specs.values() if isinstance(v.get("image"), dict)}
        )

    def serving_root_of(self, model: str) -> str | None:
        """Where the repository is mounted when served, as ``tritonkit build`` recorded it for
        the spec that built ``model`` (vLLM stages name their files by it); None: not recorded."""
        spec = self.owner(model)
        value = self.specs[spec].get("serving_root") if spec is not None else None
        return value if isinstance(value, str) else None

    def bls_external(self) -> dict[str, list[str]]:
        """Calling model -> the BLS callees its spec declared external (``bls_external``)."""
        out: dict[str, list[str]] = {}
        for value in self.specs.values():
            declared = value.get("bls_external")
            if not isinstance(declared, dict):
                continue
            for model, names in declared.items():
                if model in value["models"] and isinstance(names, list):
                    out[str(model)] = [str(n) for n in names]
        return out

    def models_of(self, spec: str) -> list[str]:
        return list(self.specs.get(spec, {}).get("models", []))

    def sibling_release(self, model: str) -> str | None:
        """The one release recorded among the models built from ``model``'s spec (None: none
        recorded, or several): a TensorRT-LLM engine model records none, its Python siblings do."""
        spec = self.owner(model)
        if spec is None:
            return None
        releases = {self.target_of(m) for m in self.models_of(spec)} - {None}
        return releases.pop() if len(releases) == 1 else None

    def assign(
        self,
        spec: str,
        source: str,
        models: list[str],
        targets: Mapping[str, str] | None = None,
        *,
        serving_root: str | None = None,
        bls_external: Mapping[str, list[str]] | None = None,
        image: Mapping[str, Any] | None = None,
    ) -> None:
        for other, value in self.specs.items():
            if other != spec:
                value["models"] = [m for m in value["models"] if m not in models]
                if isinstance(value.get("targets"), dict):
                    value["targets"] = {m: r for m, r in value["targets"].items() if m in value["models"]}
        self.specs = {k: v for k, v in self.specs.items() if v["models"] or k == spec}
        entry: dict[str, Any] = {"source": source, "models": sorted(models)}
        if targets:
            entry["targets"] = dict(sorted(targets.items()))
        if serving_root is not None:
            entry["serving_root"] = serving_root
        if bls_external:
            entry["bls_external"] = {m: sorted(n) for m, n in sorted(bls_external.items())}
        if image:
            entry["image"] = dict(image)
        self.specs[spec] = entry

    def dumps(self) -> str:
        return json.dumps({"format": _FORMAT, "specs": dict(sorted(self.specs.items()))}, indent=2) + "\n"

    def write(self, repo: Path) -> None:
        atomic_write_text(repo / MANIFEST_NAME, self.dumps())
