"""checkov 3 over what `tritonkit deploy aks --dry-run` writes, before and after hardening (issue #34).

Scans, as a platform team's admission review would, the shipped AKS manifests (``deploy/aks``)
and the Helm chart's rendering (``helm template deploy/aks-chart``):

- ``before``: both as committed at ``--before-ref`` (default ``main``), read with ``git archive``;
- ``after``: both as committed in this checkout;
- ``after_pinned``: a fresh dry run of the same example repository with every image pinned by
  digest. No registry is asked (nothing here touches the network), so the digests are
  placeholders (sha256 of the image name): they exercise the pinned rendering, which a cluster
  could not pull.

Records ``benchmarks/results/checkov_aks.json``: per run, checkov's summary and, per check,
how many resources passed, failed or were skipped (with the skip reasons). checkov runs from its
own virtualenv (``--checkov``, default ``/tmp/venv-checkov/bin/checkov``;
``python3 -m venv /tmp/venv-checkov && /tmp/venv-checkov/bin/pip install checkov``).

    PYTHONPATH=. python benchmarks/checkov_aks.py
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "checkov_aks.json"
HELM = Path(sys.executable).parent / "helm"


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600, **kwargs)


def _stage(target: Path, manifests: Path, chart: Path) -> None:
    """``target/manifests`` (the YAML files) and ``target/helm/rendered.yaml`` (the chart templated)."""
    (target / "manifests").mkdir(parents=True)
    for path in sorted(manifests.glob("*.yaml")):
        (target / "manifests" / path.name).write_text(path.read_text())
    done = _run([str(HELM), "template", "release", str(chart)])
    if done.returncode != 0:
        raise SystemExit(f"helm template {chart} failed: {done.stderr}")
    (target / "helm").mkdir()
    (target / "helm" / "rendered.yaml").write_text(done.stdout)


def _from_git(ref: str, into: Path) -> Path:
    cmd = ["git", "-C", str(ROOT), "archive", "--format=tar", ref, "deploy/aks", "deploy/aks-chart"]
    archive = subprocess.run(cmd, capture_output=True, check=False, timeout=120)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {ref}: {archive.stderr.decode(errors='replace')}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout), mode="r") as tar:
        tar.extractall(into, filter="data")
    return into / "deploy"


def _pinned(into: Path) -> Path:
    """A fresh dry run of the example repository with every image pinned (placeholder digests)."""
    from tests.conftest import ENSEMBLES, EXAMPLE_SPECS
    from tests.unit.test_deploy_committed import AKS_FLAGS
    from tritonkit.deploy.aks import AksDeployer, AksOptions
    from tritonkit.deploy.base import write_artifacts
    from tritonkit.repository import build_spec

    repo = into / "model_repository"
    for spec in EXAMPLE_SPECS:
        build_spec(ENSEMBLES / spec, repo)
    images = AksOptions(repository=repo, **AKS_FLAGS).images()
    digests = {image: "sha256:" + hashlib.sha256(image.encode()).hexdigest() for image in images}
    for out, fmt in (("aks", "manifests"), ("aks-chart", "helm")):
        options = AksOptions(repository=repo, output_format=fmt, image_digests=digests, **AKS_FLAGS)
        write_artifacts(AksDeployer(options=options).plan(), into / "deploy" / out)
    return into / "deploy"


def _checkov(checkov: str, directory: Path) -> dict[str, Any]:
    cmd = [checkov, "-d", str(directory), "--framework", "kubernetes", "-o", "json", "--compact"]
    done = _run(cmd)
    if not done.stdout.strip():
        raise SystemExit(f"checkov gave no report: {done.stderr}")
    report = json.loads(done.stdout)
    report = report[0] if isinstance(report, list) else report
    per_check: dict[str, dict[str, Any]] = defaultdict(lambda: {"passed": 0, "failed": 0, "skipped": 0})
    failed: list[dict[str, str]] = []
    for outcome in ("passed", "failed", "skipped"):
        for c in report["results"].get(f"{outcome}_checks", []):
            row = per_check[c["check_id"]]
            row[outcome] += 1
            if outcome == "skipped":
                reason = (c.get("check_result") or {}).get("suppress_comment")
                row.setdefault("reasons", {})[c["resource"]] = reason
            if outcome == "failed":
                failed.append({"check": c["check_id"], "resource": c["resource"], "file": c["file_path"]})
    return {"summary": report["summary"], "failed": failed, "per_check": dict(sorted(per_check.items()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkov", default="/tmp/venv-checkov/bin/checkov")
    parser.add_argument("--before-ref", default="main")
    args = parser.parse_args()
    version = _run([args.checkov, "--version"]).stdout.strip()
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="checkov-aks-") as tmp:
        base = Path(tmp)
        sources = {
            "before": _from_git(args.before_ref, base / "git"),
            "after": ROOT / "deploy",
            "after_pinned": _pinned(base / "pinned"),
        }
        for name, deploy in sources.items():
            staged = base / "scan" / name
            _stage(staged, deploy / "aks", deploy / "aks-chart")
            runs[name] = _checkov(args.checkov, staged)
    record = {
        "what": "checkov over deploy/aks and `helm template deploy/aks-chart` (issue #34)",
        "checkov": version,
        "before_ref": args.before_ref,
        "runs": runs,
    }
    tmp_out = RESULTS.with_suffix(".json.tmp")
    tmp_out.write_text(json.dumps(record, indent=2) + "\n")
    tmp_out.replace(RESULTS)
    for name, run in runs.items():
        s = run["summary"]
        print(f"{name}: passed {s['passed']}, failed {s['failed']}, skipped {s['skipped']}")  # noqa: T201


if __name__ == "__main__":
    main()
