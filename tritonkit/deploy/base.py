"""The Deployer protocol (plan / apply / status) and the plan, result and status objects it uses.

A deployment is planned first, entirely offline: every check that can fail without the network
runs in ``plan()``, and the artifacts it would create are rendered as text. ``apply()`` then
performs the network calls; ``--dry-run`` stops after writing the plan's artifacts to disk.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tritonkit.errors import DeployError

#: Called with one human-readable line per step while a deployment runs.
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Artifact:
    """One rendered file of a plan: Azure ML CLI v2 YAML or a Kubernetes manifest."""

    filename: str
    text: str
    description: str = ""


@dataclass(frozen=True)
class DeployPlan:
    """Everything a deployment would create, checked offline."""

    target: str
    repository: Path
    artifacts: tuple[Artifact, ...]
    summary: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SmokeResult:
    """One smoke-test step against the deployed endpoint."""

    check: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class DeployResult:
    """What ``apply()`` did: the address to score against and the smoke-test outcome."""

    target: str
    scoring_uri: str | None
    summary: tuple[tuple[str, str], ...] = ()
    smoke: tuple[SmokeResult, ...] = field(default=())


@dataclass(frozen=True)
class DeployStatus:
    """The live state of a deployment (provisioning state, ready replicas...)."""

    target: str
    ready: bool
    details: tuple[tuple[str, str], ...] = ()


class Deployer(Protocol):
    """A deployment target: plan offline, apply over the network, report status."""

    target: str

    def plan(self) -> DeployPlan:
        """Run every offline check and render the artifacts; no network call."""
        ...

    def apply(self, plan: DeployPlan, *, progress: Progress | None = None) -> DeployResult:
        """Create or update the deployment described by ``plan`` and smoke-test it."""
        ...

    def status(self) -> DeployStatus:
        """Ask the target for the deployment's current state."""
        ...


def write_artifacts(plan: DeployPlan, out_dir: Path) -> list[Path]:
    """Write the plan's artifacts into ``out_dir`` atomically.

    The files are written into a temporary sibling directory (holding a copy of whatever else
    ``out_dir`` contained), which then replaces ``out_dir`` by rename: a reader sees either the
    old directory or the complete new one, never a half-written one, and unrelated files survive.
    """
    out_dir = Path(out_dir)
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        if out_dir.exists() and not out_dir.is_dir():
            raise DeployError(
                f"{out_dir} exists and is not a directory",
                hint="choose another output directory with -o DIR",
            )
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=parent))
    except OSError as exc:
        raise DeployError(f"cannot create the output directory {out_dir}: {exc.strerror}") from exc
    backup: Path | None = None
    try:
        if out_dir.is_dir():
            shutil.copytree(out_dir, tmp, dirs_exist_ok=True, symlinks=True)
        written: list[Path] = []
        for artifact in plan.artifacts:
            target = tmp / artifact.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(artifact.text)
                fh.flush()
                os.fsync(fh.fileno())
            written.append(out_dir / artifact.filename)
        os.chmod(tmp, 0o755)
        if out_dir.is_dir():
            backup = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
            backup.rmdir()
            os.replace(out_dir, backup)
        os.replace(tmp, out_dir)
    except OSError as exc:
        if backup is not None and backup.exists() and not out_dir.exists():
            os.replace(backup, out_dir)
            backup = None
        raise DeployError(f"cannot write the deployment files to {out_dir}: {exc}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if backup is not None:
            shutil.rmtree(backup, ignore_errors=True)
    return written


@dataclass(frozen=True)
class DeployOutcome:
    """What one `tritonkit deploy` run did: a status report, a dry run's files, or a deployment."""

    status: DeployStatus | None = None
    plan: DeployPlan | None = None
    written: tuple[Path, ...] = ()
    result: DeployResult | None = None

    @property
    def failed_smoke(self) -> tuple[SmokeResult, ...]:
        return tuple(s for s in self.result.smoke if not s.ok) if self.result is not None else ()


def run_deployer(
    deployer: Deployer,
    *,
    status: bool,
    dry_run: bool,
    out: Path,
    on_plan: Callable[[DeployPlan], None] | None = None,
    progress: Progress | None = None,
) -> DeployOutcome:
    """Report the status, write the plan (``dry_run``), or apply it.

    ``on_plan`` sees the plan before anything is written or sent, so a caller can show its
    warnings and summary before a long apply.
    """
    if status:
        return DeployOutcome(status=deployer.status())
    plan = deployer.plan()
    if on_plan is not None:
        on_plan(plan)
    if dry_run:
        return DeployOutcome(plan=plan, written=tuple(write_artifacts(plan, out)))
    return DeployOutcome(plan=plan, result=deployer.apply(plan, progress=progress))
