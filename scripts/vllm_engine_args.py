"""Regenerate tritonkit/kinds/vllm/engine_args.json: the engine arguments each vLLM knows.

NVIDIA's vLLM backend builds ``AsyncEngineArgs(**model.json)``, so the keys a ``model.json`` may
hold are the ``__init__`` fields of vLLM's ``AsyncEngineArgs`` dataclass (with those of its base
``EngineArgs``), as ``vllm/engine/arg_utils.py`` declares them. For every vLLM version in
``tritonkit.kinds.releases.VLLM_RELEASES`` this script reads that one file out of the
version's x86_64 wheel on PyPI (HTTP range requests on the zip: a few hundred KB, not the
100-500 MB wheel), parses it with ``ast`` (nothing of vLLM is imported or run) and records the
field names with the wheel's name and sha256. A version PyPI does not have (NVIDIA's
0.9.0rc1 build) is left out: the validator then says it cannot check, and raises no alarm.

    python scripts/vllm_engine_args.py            # writes the JSON next to kinds/vllm/engine_args.py
"""

from __future__ import annotations

import ast
import io
import json
import sys
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonkit.kinds.releases import VLLM_RELEASES  # noqa: E402

OUT = ROOT / "tritonkit" / "kinds" / "vllm" / "engine_args.json"
SIMPLE = "https://pypi.org/simple/vllm/"
MEMBER = "vllm/engine/arg_utils.py"
_CLASSES = ("EngineArgs", "AsyncEngineArgs")


class RangeFile(io.RawIOBase):
    """A read-only, seekable view of a URL through HTTP Range requests (enough for zipfile)."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            data: bytes = resp.read()
        self.pos += len(data)
        return data


def wheel_for(version: str, files: list[dict[str, Any]]) -> dict[str, Any] | None:
    wheels = [
        f
        for f in files
        if f["filename"].startswith(f"vllm-{version}-")
        and f["filename"].endswith("x86_64.whl")
        and not f.get("yanked")
    ]
    return sorted(wheels, key=lambda f: f["filename"])[0] if wheels else None


def init_fields(source: str) -> dict[str, list[str]]:
    """The dataclass ``__init__`` field names of EngineArgs and AsyncEngineArgs."""
    tree = ast.parse(source)
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in _CLASSES:
            names = []
            for stmt in node.body:
                if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                    continue
                if "ClassVar" in ast.unparse(stmt.annotation):
                    continue
                if isinstance(stmt.value, ast.Call) and any(
                    k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in stmt.value.keywords
                ):
                    continue
                names.append(stmt.target.id)
            out[node.name] = names
    return out


def main() -> None:
    req = urllib.request.Request(SIMPLE, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        files = json.load(resp)["files"]
    versions: dict[str, Any] = {}
    for version in sorted({r.vllm for r in VLLM_RELEASES.values()}, key=_version_key):
        wheel = wheel_for(version, files)
        if wheel is None:
            sys.stderr.write(f"{version}: no wheel on PyPI, left out\n")
            continue
        with zipfile.ZipFile(RangeFile(wheel["url"], wheel["size"])) as zf:  # type: ignore[arg-type]
            source = zf.read(MEMBER).decode("utf-8")
        fields = init_fields(source)
        if "EngineArgs" not in fields:
            raise SystemExit(f"{version}: {MEMBER} has no EngineArgs dataclass")
        names = sorted(set(fields["EngineArgs"]) | set(fields.get("AsyncEngineArgs", [])))
        versions[version] = {
            "wheel": wheel["filename"],
            "sha256": wheel["hashes"]["sha256"],
            "names": names,
        }
        sys.stderr.write(f"{version}: {len(names)} engine arguments from {wheel['filename']}\n")
    data = {
        "source": (
            "__init__ fields of EngineArgs and AsyncEngineArgs in vllm/engine/arg_utils.py of each "
            "version's x86_64 wheel on PyPI (scripts/vllm_engine_args.py)"
        ),
        "versions": versions,
    }
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _version_key(version: str) -> tuple[int, ...]:
    return next(r.vllm_tuple for r in VLLM_RELEASES.values() if r.vllm == version)


if __name__ == "__main__":
    main()
