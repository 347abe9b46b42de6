"""Tiny real wheels written by the tests, so pip resolves them offline through --find-links."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def write_wheel(directory: Path, name: str, version: str, tag: str, files: dict[str, str]) -> Path:
    """A valid wheel ``name-version-tag.whl`` holding ``files`` (path -> text), with RECORD."""
    directory.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    contents = dict(files)
    contents[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    pure = "true" if tag.endswith("none-any") else "false"
    contents[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: tritonkit-tests\nRoot-Is-Purelib: {pure}\nTag: {tag}\n"
    )
    contents[f"{info}/top_level.txt"] = f"{name}\n"
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = "\n".join(record) + "\n"
    wheel = directory / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in contents.items():
            zf.writestr(path, text)
    return wheel


def write_tag_probe_wheels(directory: Path, name: str = "tkprobe") -> None:
    """One binary-tagged wheel per CPython 3.10-3.13, each recording its own tag in ``TAG``."""
    for minor in (10, 11, 12, 13):
        tag = f"cp3{minor}-cp3{minor}-manylinux2014_x86_64"
        write_wheel(directory, name, "1.0", tag, {f"{name}/__init__.py": f'TAG = "{tag}"\n'})
