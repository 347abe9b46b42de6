"""`tritonkit perf --kube N`: the rendered objects (Kubernetes' own OpenAPI schemas, the hardening
baseline, checkov), the coordinator's command line, and apply / watch / collect through the
official kubernetes client."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tritonkit.cli.app import main
from tritonkit.cli.perf_kube import KubeOptions, coordinator_args, dry_run
from tritonkit.deploy.aks.checks import workload_problems
from tritonkit.deploy.aks.crd_schemas import builtin_problems
from tritonkit.deploy.aks.perf_job import RESULT_MARKER, PerfJob, objects, render_perf_job
from tritonkit.deploy.aks.perf_kube import KubePerfRun, deployed_tritonkit_image, result_from_log
from tritonkit.errors import KubernetesError, PerfError

DIGEST = "sha256:" + "ab" * 32
IMAGE = f"example.azurecr.io/tritonkit@{DIGEST}"
ARGV = [
    "perf",
    "http://triton.serving.svc:8000",
    "clock_llm",
    "--concurrency",
    "16,64",
    "--prompt-tokens",
    "8",
    "--kube",
    "4",
    "--image",
    IMAGE,
    "--namespace",
    "perf",
    "--kube-name",
    "run1",
    "--key-env",
    "TRITON_KEY",
    "--kube-secret",
    "perf-keys",
    "--json",
    "out.json",
    "--workers",
    "0",
]


@pytest.fixture()
def rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[dict[str, Any]]]:
    # the invoking shell's value is never read into the manifests: a marker proves it
    monkeypatch.setenv("TRITON_KEY", "sk-never-in-a-manifest")
    monkeypatch.setattr("sys.argv", ["tritonkit", *ARGV, "--dry-run", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as exc:
        main([*ARGV, "--dry-run", str(tmp_path / "out")])
    assert exc.value.code == 0
    files = {
        p.name: list(yaml.safe_load_all(p.read_text())) for p in sorted((tmp_path / "out").glob("*.yaml"))
    }
    for p in (tmp_path / "out").glob("*.yaml"):
        assert "sk-never-in-a-manifest" not in p.read_text()
    return files


def _by_name(files: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for docs in files.values() for d in docs}


def test_kube_dry_run_objects_pass_kubernetes_schemas_and_the_baseline_when_rendered(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = _by_name(rendered)
    assert sorted(docs) == [
        "Job/run1-coordinator",
        "Job/run1-workers",
        "NetworkPolicy/run1-coordinator",
        "NetworkPolicy/run1-workers",
        "Service/run1-coordinator",
        "ServiceAccount/run1",
    ]
    for doc in docs.values():
        assert builtin_problems(doc) == []
        assert doc["metadata"]["namespace"] == "perf"
    for name in ("Job/run1-coordinator", "Job/run1-workers"):
        assert workload_problems(docs[name], token_allowed=False) == []
    # no Role, no RoleBinding: no pod calls the Kubernetes API
    assert docs["ServiceAccount/run1"]["automountServiceAccountToken"] is False


def test_kube_workers_are_an_indexed_job_connecting_to_the_coordinator_service_when_rendered(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = _by_name(rendered)
    workers = docs["Job/run1-workers"]["spec"]
    assert workers["completionMode"] == "Indexed"
    assert workers["completions"] == workers["parallelism"] == 4
    container = workers["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "tritonkit.perf.worker"]
    assert container["args"][:2] == ["--connect", "run1-coordinator:7070"]
    assert container["image"] == IMAGE and container["imagePullPolicy"] == "IfNotPresent"
    service = docs["Service/run1-coordinator"]["spec"]
    coordinator = docs["Job/run1-coordinator"]["spec"]["template"]
    assert service["selector"].items() <= coordinator["metadata"]["labels"].items()


def test_kube_key_is_a_mounted_secret_reference_and_local_options_stay_home_when_rendered(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    pod = _by_name(rendered)["Job/run1-coordinator"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    secret = [v["secret"] for v in pod["volumes"] if "secret" in v]
    assert secret == [
        {
            "secretName": "perf-keys",
            "defaultMode": 0o440,
            "items": [{"key": "TRITON_KEY", "path": "TRITON_KEY"}],
        }
    ]
    assert all("valueFrom" not in e for e in container["env"])  # the key is a file, read by the shell
    assert "--key-env" in container["args"] and "TRITON_KEY" in container["args"]
    for local in ("--json", "--kube", "--image", "--namespace", "--kube-secret", "--workers"):
        assert local not in container["args"]
    script = container["command"][2]
    assert "--listen 0.0.0.0:7070 --workers 4" in script and RESULT_MARKER in script


def _checkov() -> str | None:
    for candidate in (
        os.environ.get("TRITONKIT_CHECKOV"),
        shutil.which("checkov"),
        "/tmp/venv-checkov/bin/checkov",
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def test_kube_dry_run_objects_fail_no_checkov_check_when_the_image_is_pinned(tmp_path: Path) -> None:
    checkov = _checkov()
    if checkov is None:
        pytest.skip("checkov is not installed (set TRITONKIT_CHECKOV; see benchmarks/checkov_aks.py)")
    job = PerfJob(name="run1", namespace="perf", image=IMAGE, workers=4, perf_args=("http://t:8000", "m"))
    out = tmp_path / "manifests"
    out.mkdir()
    for name, docs in render_perf_job(job).items():
        (out / name).write_text(yaml.safe_dump_all(docs))
    done = subprocess.run(
        [checkov, "-d", str(out), "--framework", "kubernetes", "--quiet", "--compact", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = json.loads(done.stdout)
    report = report[0] if isinstance(report, list) else report
    assert report["summary"]["failed"] == 0, [c["check_id"] for c in report["results"]["failed_checks"]]
    assert report["summary"]["passed"] > 0


def test_coordinator_args_refuse_a_local_file_when_the_pod_cannot_have_it() -> None:
    with pytest.raises(PerfError, match="--dataset names a file on this machine"):
        coordinator_args(["http://t:8000", "m", "--dataset", "prompts.jsonl"])
    with pytest.raises(PerfError, match="--entra-id is not available"):
        coordinator_args(["http://t:8000", "m", "--entra-id"])


def test_coordinator_args_keep_the_load_and_collect_credentials_when_given_inline_values() -> None:
    args, envs = coordinator_args(
        ["u", "m", "--request-rate=5,10", "--json=o.json", "--restricted-header", "H=ADMIN", "-q", "--kube=3"]
    )
    assert args == ("u", "m", "--request-rate=5,10", "--restricted-header", "H=ADMIN")
    assert envs == ("ADMIN",)


def test_kube_needs_a_secret_when_a_key_env_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_KEY", "x")
    argv = [a for a in ARGV if a not in ("--kube-secret", "perf-keys")]
    monkeypatch.setattr("sys.argv", ["tritonkit", *argv, "--dry-run", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--dry-run", str(tmp_path / "out")])
    assert exc.value.code == 1
    assert not (tmp_path / "out").exists()


# --- apply / watch / collect ---------------------------------------------------------------------


class _ApiServer(BaseHTTPRequestHandler):
    """A stand-in for the Kubernetes API server (no cluster can run here): it records what the
    official client sends and answers the few reads perf --kube makes. The client, its request
    building and its response models are the real ones."""

    created: list[tuple[str, str]] = []
    deleted: list[str] = []
    job_status: dict[str, Any] = {}
    log = ""
    deployments: list[dict[str, Any]] = []
    asked: list[str] = []

    def log_message(self, *args: Any) -> None:  # keep pytest's output quiet
        pass

    def _send(self, body: Any, status: int = 200, text: bool = False) -> None:
        data = (body if text else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).created.append((self.path, doc["kind"]))
        self._send(doc, 201)

    def do_DELETE(self) -> None:  # noqa: N802
        type(self).deleted.append(self.path)
        self._send({"metadata": {}})  # reads as the deleted object or a Status

    def do_GET(self) -> None:  # noqa: N802
        type(self).asked.append(self.path)
        if "/deployments?" in self.path:
            self._send(
                {"apiVersion": "apps/v1", "kind": "DeploymentList", "metadata": {}, "items": self.deployments}
            )
        elif self.path.endswith("/status"):
            self._send(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": "x"},
                    "status": self.job_status,
                }
            )
        elif "/pods?" in self.path:
            pod = {"metadata": {"name": "run1-coordinator-abc"}, "status": {"phase": "Succeeded"}}
            self._send({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [pod]})
        elif self.path.endswith("/log"):
            self._send(self.log, text=True)
        else:
            self._send({"kind": "Status", "code": 404}, 404)


@pytest.fixture()
def api() -> Iterator[Any]:
    kubernetes = pytest.importorskip("kubernetes")
    _ApiServer.created, _ApiServer.deleted, _ApiServer.asked = [], [], []
    _ApiServer.deployments = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ApiServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = kubernetes.client.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    yield kubernetes.client.ApiClient(config)
    server.shutdown()


def test_kube_run_creates_in_order_collects_the_json_and_deletes_when_the_coordinator_succeeds(
    api: Any,
) -> None:
    job = PerfJob(name="run1", namespace="perf", image=IMAGE, workers=2, perf_args=("u", "m"))
    _ApiServer.job_status = {"succeeded": 1}
    _ApiServer.log = "warming up\n" + RESULT_MARKER + "\n" + json.dumps({"url": "u", "steps": []})
    run = KubePerfRun(job, api_client=api)
    run.apply(objects(render_perf_job(job)))
    assert [kind for _, kind in _ApiServer.created] == [
        "ServiceAccount",
        "Service",
        "NetworkPolicy",
        "NetworkPolicy",
        "Job",
        "Job",
    ]
    assert _ApiServer.created[-1][0] == "/apis/batch/v1/namespaces/perf/jobs"
    assert run.wait(timeout_s=30) == {"url": "u", "steps": []}
    run.delete()
    assert "/apis/batch/v1/namespaces/perf/jobs/run1-workers" in _ApiServer.deleted


def test_kube_run_fails_with_the_coordinators_log_when_its_job_failed(api: Any) -> None:
    job = PerfJob(name="run1", namespace="perf", image=IMAGE, workers=2, perf_args=("u", "m"))
    _ApiServer.job_status = {"failed": 1}
    _ApiServer.log = "error: load worker pod-1 went away during the step"
    with pytest.raises(KubernetesError, match="coordinator Job perf/run1-coordinator failed") as exc:
        KubePerfRun(job, api_client=api).wait(timeout_s=30)
    assert "pod-1 went away" in str(exc.value.hint)


def test_result_from_log_names_the_log_tail_when_no_result_was_printed() -> None:
    with pytest.raises(KubernetesError, match="ended without a result"):
        result_from_log("Traceback ...", where="Job perf/x")


def _deployment(name: str, containers: dict[str, str]) -> dict[str, Any]:
    """A Deployment as `deploy aks` writes one: its containers by name -> image."""
    return {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "tritonkit"}},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/instance": name}},
            "template": {
                "spec": {"containers": [{"name": c, "image": image} for c, image in containers.items()]}
            },
        },
    }


def test_kube_image_defaults_to_the_one_deploy_aks_runs_tritonkit_from_when_none_is_given(
    tmp_path: Path, api: Any
) -> None:
    _ApiServer.deployments = [
        _deployment(
            "triton", {"tritonserver": "nvcr.io/nvidia/tritonserver:24.10-py3", "openai-front": IMAGE}
        ),
        _deployment(
            "triton-b", {"tritonserver": "nvcr.io/nvidia/tritonserver:24.10-py3", "tritonkit-heal": IMAGE}
        ),
    ]
    assert deployed_tritonkit_image("perf", api_client=api) == IMAGE
    from urllib.parse import parse_qs, urlsplit

    asked = urlsplit(_ApiServer.asked[0])
    assert parse_qs(asked.query)["labelSelector"] == [
        "app.kubernetes.io/name=triton,app.kubernetes.io/managed-by=tritonkit"
    ]
    assert asked.path == "/apis/apps/v1/namespaces/perf/deployments"
    from tritonkit.perf import PerfSettings

    settings = PerfSettings(url="http://triton:8000", model="clock_llm", levels=(16.0,))
    argv = ["http://triton:8000", "clock_llm", "--kube", "2", "--kube-name", "run1"]
    options = KubeOptions(2, "perf", None, None, None, "run1", tmp_path / "out", api_client=api)
    written = dry_run(settings, argv, options)
    jobs = [d for p in written for d in yaml.safe_load_all(p.read_text()) if d["kind"] == "Job"]
    assert {c["image"] for j in jobs for c in j["spec"]["template"]["spec"]["containers"]} == {IMAGE}


def test_kube_image_lookup_refuses_when_tritonkit_runs_from_two_images_or_none(api: Any) -> None:
    with pytest.raises(KubernetesError, match="has no Deployment of `deploy aks` that runs tritonkit"):
        deployed_tritonkit_image("perf", api_client=api)
    _ApiServer.deployments = [
        _deployment("a", {"openai-front": IMAGE}),
        _deployment("b", {"openai-front": "example.azurecr.io/tritonkit:old"}),
    ]
    with pytest.raises(KubernetesError, match="run different images") as exc:
        deployed_tritonkit_image("perf", api_client=api)
    assert "a/openai-front" in str(exc.value) and "b/openai-front" in str(exc.value)


def test_kube_without_image_or_cluster_says_to_name_an_image_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("kubernetes")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    argv = ["perf", "http://triton:8000", "clock_llm", "--kube", "2", "--dry-run", str(tmp_path / "out")]
    monkeypatch.setattr("sys.argv", ["tritonkit", *argv])
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert "--kube without --image" in err and "--image REGISTRY/IMAGE" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_kube_key_env_is_not_read_from_the_invoking_shell_when_the_pod_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRITON_KEY", raising=False)
    monkeypatch.setattr("sys.argv", ["tritonkit", *ARGV, "--dry-run", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as exc:
        main([*ARGV, "--dry-run", str(tmp_path / "out")])
    assert exc.value.code == 0
    assert any("perf-keys" in p.read_text() for p in (tmp_path / "out").glob("*.yaml"))
