"""A serving image of one's own, declared in a spec by what matters to its Python models.

```yaml
image:
  name: myacr.azurecr.io/triton-torch:24.10   # what `deploy` runs
  python: "3.10"                              # its /usr/bin/python3 (the stub's Python)
  packages: image-freeze.txt                  # `pip freeze` run inside it (or a lock file)
  base: "24.10"                               # optional: the NGC release it is FROM (default: the
                                              # spec's target, else 24.10): its glibc for wheels
```

What the packages file lists is what the image provides: imports of it pass the build's and the
validator's check, requirements it already satisfies are not packed, and what is packed is
resolved against its versions (they are pip constraints) and then left out of the archive. The
build records the image in the repository's manifest, so ``validate`` and ``deploy`` use it
without being told.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tritonkit._records import from_record, to_record
from tritonkit.errors import SpecError
from tritonkit.kinds.releases import TritonTarget, resolve_target
from tritonkit.repository.image_packages import ImageTarget, read_freeze, target_from_distributions

__all__ = ["CustomImage", "check_python_version", "parse_image"]

_PYTHON = re.compile(r"^3\.\d{1,2}$")
_KEYS = ("name", "python", "packages", "base")


@dataclass(frozen=True, kw_only=True)
class CustomImage:
    """A declared custom serving image: its name, Python and installed distributions."""

    name: str
    python: str  # "3.10"
    base: str  # the NGC release it is built from ("24.10")
    #: canonical distribution name -> version ("" when the file gives none)
    distributions: Mapping[str, str]
    packages_file: str = ""  # where the list came from (for messages)

    def target(self) -> ImageTarget:
        """What the validator judges a Python model's imports against."""
        return target_from_distributions(
            self.distributions,
            description=(
                f"the custom image {self.name} (Python {self.python}, {len(self.distributions)} packages)"
            ),
            python=self.python,
            release=self.base,
        )

    def triton_target(self) -> TritonTarget:
        """The packing target: the base release's platform, this image's Python and numpy."""
        base = resolve_target(self.base, where="image.base")
        return replace(base, python=self.python, numpy=self.distributions.get("numpy") or base.numpy)

    def provides(self, requirement: str) -> bool:
        """Whether the image has the distribution ``requirement`` names (any version it lists is
        taken as the one to use: the image is what it is)."""
        try:
            name = canonicalize_name(Requirement(requirement).name)
        except InvalidRequirement:
            return False
        return name in self.distributions

    @property
    def pins(self) -> tuple[str, ...]:
        """pip constraints: what is packed must agree with what the image has."""
        return tuple(f"{n}=={v}" for n, v in sorted(self.distributions.items()) if v)

    def to_record(self) -> dict[str, Any]:
        distributions = dict(sorted(self.distributions.items()))
        return {**to_record(self, skip=("distributions",)), "distributions": distributions}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> CustomImage:
        return from_record(cls, data, defaults={"base": "24.10", "distributions": {}})


def check_python_version(value: Any, *, where: str = "--image-python", spec: Path | None = None) -> str:
    """``value`` as a MAJOR.MINOR Python version ("3.10"); SpecError otherwise."""
    python = str(value if value is not None else "").strip()
    if not _PYTHON.match(python):
        raise SpecError(
            f"{where} must be the image's Python as MAJOR.MINOR, got {value!r}",
            file=spec,
            hint='run `python3 --version` in the image; in YAML quote it: python: "3.10"',
        )
    return python


def parse_image(raw: Any, *, spec: Path, default_base: str) -> CustomImage:
    """The spec's ``image:`` mapping; SpecError naming the key at fault."""
    if not isinstance(raw, Mapping):
        raise SpecError(
            "'image' must be a mapping: {name: ..., python: \"3.10\", packages: image-freeze.txt}", file=spec
        )
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise SpecError(
            f"image: unknown key(s) {', '.join(unknown)}", file=spec, hint="allowed: " + ", ".join(_KEYS)
        )
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name.strip()):
        raise SpecError("image.name must be the image reference deploy runs (registry/repo:tag)", file=spec)
    python = check_python_version(raw.get("python"), where="image.python", spec=spec)
    base = resolve_target(raw.get("base", default_base), where=f"{spec}: image.base").release
    packages = raw.get("packages")
    if not isinstance(packages, str) or not packages.strip():
        raise SpecError(
            "image.packages must name a file listing the image's packages",
            file=spec,
            hint="run `pip freeze > image-freeze.txt` inside the image and put the file beside the spec",
        )
    path = (spec.parent / packages).resolve()
    dists = {str(canonicalize_name(n)): v for n, v in read_freeze(path, option="image.packages")}
    return CustomImage(
        name=name.strip(), python=python, base=base, distributions=dists, packages_file=str(path)
    )
