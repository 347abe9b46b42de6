"""The tune checkpoint: a JSONL file of the run's measurements that ``--resume`` replays (the
search is deterministic, so replaying it over the recorded outcomes resumes where it stopped)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonkit.errors import TuneError
from tritonkit.tune.objective import Measurement, Objective
from tritonkit.tune.settings import TuneSettings
from tritonkit.tune.space import Space

__all__ = ["CHECKPOINT_VERSION", "Checkpoint", "checkpoint_header", "read_checkpoint"]

CHECKPOINT_VERSION = 2


def checkpoint_header(settings: TuneSettings, space: Space, objective: Objective) -> dict[str, Any]:
    """The first line: a checkpoint resumes only the run it belongs to."""
    return {
        "type": "header",
        "version": CHECKPOINT_VERSION,
        "model": settings.model,
        "strategy": settings.strategy,
        "space": space.to_dict(),
        "objective": [
            objective.kind,
            str(objective.budget),
            objective.min_throughput,
            *(str(lim) for lim in objective.stream_limits),
        ],
        "search": [settings.trials, settings.patience, settings.seed],
    }


def read_checkpoint(path: Path, header: Mapping[str, Any]) -> list[str]:
    """The measurement lines of ``path`` when its header is ``header`` (none: no file yet)."""
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise TuneError(f"cannot read checkpoint {path}: {exc.strerror}") from exc
    if not lines:
        return []
    try:
        first = json.loads(lines[0])
        good = [ln for ln in lines[1:] if _is_json(ln)]  # a line cut by a crash is dropped
    except ValueError as exc:
        raise TuneError(f"checkpoint {path} is not a tritonkit tune checkpoint (JSONL)") from exc
    if first != dict(header):
        raise TuneError(
            f"checkpoint {path} belongs to a different run (model, strategy, space or objective differ)",
            hint="use the same settings to resume, or another --checkpoint path for a new run",
        )
    return good


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


class Checkpoint:
    """The run's measurements appended as they come (JSONL, fsynced), after its header and the
    lines kept from the run it resumes (rewritten atomically)."""

    def __init__(self, path: Path | None, header: Mapping[str, Any], keep: list[str]) -> None:
        self.path = path
        self.fh: Any = None
        if path is not None:
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text("\n".join([json.dumps(dict(header)), *keep]) + "\n", encoding="utf-8")
            os.replace(tmp, path)
            self.fh = path.open("a", encoding="utf-8")

    def write(self, m: Measurement) -> None:
        if self.fh is None or m.resumed:
            return
        self.fh.write(json.dumps({"type": "measurement", **m.to_dict()}) + "\n")
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
