"""What Azure ML receives of a repository: a mirror with a placeholder in each empty version
directory (blob storage keeps no empty directories)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def empty_version_dirs(root: Path) -> list[Path]:
    """Numeric version directories without any file (ensembles have them)."""
    return sorted(
        v
        for v in Path(root).glob("*/*")
        if v.is_dir()
        and v.name.isdigit()
        and not v.parent.name.startswith(".")
        and not any(p.is_file() for p in v.rglob("*"))
    )


PLACEHOLDER = ".tritonkit-keep"


@contextlib.contextmanager
def staged_repository(root: Path) -> Iterator[Path]:
    """``root`` as Azure ML should receive it: a mirror of symlinks to its files plus a placeholder
    in every empty version directory (blob storage drops empty directories, and Triton needs an
    ensemble's ``1/``). The user's repository is not touched; the mirror is removed afterwards."""
    root = Path(root).resolve()
    empty = empty_version_dirs(root)
    if not empty:
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="tritonkit-aml-") as tmp:
        mirror = Path(tmp) / root.name
        for dirpath, _dirnames, filenames in os.walk(root):
            rel = Path(dirpath).relative_to(root)
            (mirror / rel).mkdir(parents=True, exist_ok=True)
            for fname in filenames:
                if rel == Path(".") and fname in (".amlignore", ".gitignore"):
                    # The SDK resolves the ignore file's path: a symlink would anchor its
                    # patterns at the original root instead of the mirror.
                    shutil.copy2(Path(dirpath) / fname, mirror / fname)
                else:
                    os.symlink(Path(dirpath) / fname, mirror / rel / fname)
        for v in empty:
            (mirror / v.relative_to(root) / PLACEHOLDER).write_text(
                "Keeps this Triton version directory in Azure ML's upload.\n", encoding="utf-8"
            )
        yield mirror
