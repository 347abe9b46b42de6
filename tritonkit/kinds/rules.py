"""What rules need: problems, the report, the per-file reporter that turns field paths into line
numbers, what the checks (the validator's own and the backend kinds') are told, and which versions
Triton loads.

A leaf of :mod:`tritonkit.kinds`: it depends on :mod:`tritonkit.config` alone, so a kind's checks
import it without loading the validator (:mod:`tritonkit.repository.validator.report` re-exports
it). The contexts carry what the kinds read of the serving image and the build manifest, as
protocols the validator's :class:`~tritonkit.repository.image_packages.ImageTarget` and
:class:`~tritonkit.repository.manifest.Manifest` satisfy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from tritonkit._records import to_record
from tritonkit.config import FieldLocator, ModelConfig, locate_fields

__all__ = [
    "ConfigFile",
    "FileContext",
    "ImageRelease",
    "ModelDirectory",
    "Problem",
    "RecordedTargets",
    "RepositoryContext",
    "Severity",
    "ValidationReport",
    "selected_versions",
]

Severity = Literal["error", "warning", "info"]
_FIRST_INDEX = re.compile(r"\[0\](?=\.|$)")


@dataclass(frozen=True, kw_only=True)
class Problem:
    severity: Severity
    model: str
    file: str
    line: int | None
    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return to_record(self)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.severity}: {self.code}: {self.message}"


@dataclass(kw_only=True)
class ValidationReport:
    """``valid`` is True when no problem is an error (warnings and infos are allowed)."""

    repository: Path
    problems: list[Problem] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def strict(self) -> ValidationReport:
        """The same report with every warning raised to an error (``tritonkit validate --strict``):
        for teams that want what fails only at request time (a BLS typo) to fail CI too."""
        raised = [replace(p, severity="error") if p.severity == "warning" else p for p in self.problems]
        return ValidationReport(repository=self.repository, problems=raised)

    def to_dict(self) -> dict[str, Any]:
        """Exactly the ``tritonkit validate --json`` object."""
        return {"valid": self.valid, "problems": [p.to_dict() for p in self.problems]}


@dataclass(eq=False, kw_only=True)
class ConfigFile:
    """One parsed config file of a model plus a sink for its problems.

    The field locator (a second pass over the text) only runs when a problem needs a line.
    """

    model: str
    path: Path
    display: str
    text: str = field(repr=False)
    config: ModelConfig = field(repr=False)
    sink: list[Problem] = field(repr=False)
    _locator: FieldLocator | None = field(default=None, init=False, repr=False)

    def line(self, at: str | None) -> int | None:
        if at is None:
            return None
        if self._locator is None:
            self._locator = locate_fields(self.text)
        # The locator keeps first occurrences under their index-free alias only for the whole
        # path (``step.input_map[x]``, not ``step[0].input_map[x]``): try that alias too.
        exact = self._locator.lines.get(at)
        if exact is None:
            exact = self._locator.lines.get(_FIRST_INDEX.sub("", at))
        return exact if exact is not None else self._locator.line(at)

    def error(self, code: str, message: str, *, at: str | None = None) -> None:
        self._add("error", code, message, at)

    def warning(self, code: str, message: str, *, at: str | None = None) -> None:
        self._add("warning", code, message, at)

    def add(self, problem: Problem) -> None:
        """A problem found in another file of the model (e.g. its model.py), with that file's line."""
        self.sink.append(problem)

    def info(self, code: str, message: str, *, at: str | None = None) -> None:
        """Said plainly, never a verdict: e.g. a model file tritonkit cannot inspect."""
        self._add("info", code, message, at)

    def _add(self, severity: Severity, code: str, message: str, at: str | None) -> None:
        line = self.line(at)
        self.sink.append(
            Problem(
                severity=severity, model=self.model, file=self.display, line=line, code=code, message=message
            )
        )


def selected_versions(cfg: ModelConfig, versions: Sequence[int]) -> list[int]:
    """The versions Triton would load under the config's version policy (default: latest 1)."""
    policy = cfg.version_policy
    if policy.HasField("all"):
        return list(versions)
    if policy.HasField("specific"):
        return [v for v in policy.specific.versions if v in versions]
    n = policy.latest.num_versions if policy.HasField("latest") and policy.latest.num_versions else 1
    return list(versions[-n:])


class ImageRelease(Protocol):
    """The serving image as the kinds read it: its NGC release, if it is a stock one."""

    @property
    def release(self) -> str | None: ...


class RecordedTargets(Protocol):
    """The build manifest as the kinds read it: which spec built a model, for which release."""

    def owner(self, model: str) -> str | None: ...

    def target_of(self, model: str) -> str | None: ...

    def models_of(self, spec: str) -> list[str]: ...


@dataclass(frozen=True, kw_only=True)
class ModelDirectory:
    """A model directory as the cross-model rules see it (``cf`` None: its config is unusable)."""

    name: str
    cf: ConfigFile | None
    versions: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class FileContext:
    """What a backend kind's file check is told about the config it checks.

    ``variant``: the config is a ``configs/*.pbtxt`` variant and ``main`` the model's config.pbtxt
    (None when unusable); ``explicit``: the image given to the validator; ``recorded``: the build
    manifest, if tritonkit built the repository; ``auto_complete``: Triton runs the backend's
    auto-complete (False: ``--disable-auto-complete-config``, the config is judged as written).
    """

    model_dir: Path
    display: str
    versions: tuple[int, ...]
    variant: bool = False
    main: ConfigFile | None = None
    explicit: ImageRelease | None = None
    recorded: RecordedTargets | None = None
    auto_complete: bool = True


@dataclass(frozen=True, kw_only=True)
class RepositoryContext:
    """What a backend kind's repository-wide check is told: every model as the cross-model rules see it."""

    root: Path
    infos: Mapping[str, ModelDirectory]
    explicit: ImageRelease | None = None
    recorded: RecordedTargets | None = None
