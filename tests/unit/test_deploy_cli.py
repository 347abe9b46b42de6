"""`tritonkit deploy` end to end through the CLI entry point (dry runs: no Azure or cluster here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tritonkit.cli.app import main
from tritonkit.deploy.base import Artifact, DeployPlan, write_artifacts
from tritonkit.errors import DeployError

ADDER_CONFIG = """name: "adder"
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { preferred_batch_size: [ 2, 4 ] }
instance_group [ { kind: KIND_GPU count: 3 } ]
"""


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "model_repository"
    (root / "adder" / "1").mkdir(parents=True)
    (root / "adder" / "config.pbtxt").write_text(ADDER_CONFIG)
    (root / "adder" / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    return root


def run(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_deploy_aml_dry_run_writes_loadable_yaml_when_inputs_are_valid(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import azure.ai.ml as ml

    out = tmp_path / "deploy" / "aml"
    argv = [
        "deploy",
        "--target",
        "aml",
        "--dry-run",
        str(repo),
        "--endpoint",
        "triton-ep",
        "--deployment",
        "green",
        "--instance-type",
        "Standard_NC6s_v3",
        "-o",
        str(out),
        "--instance-count",
        "2",
        "--auth-mode",
        "aml_token",
    ]
    assert run(argv) == 0
    stdout = capsys.readouterr().out
    assert "wrote" in stdout and "nothing was deployed" in stdout
    dep = ml.load_online_deployment(out / "deployment.yml")
    # 2 x largest preferred batch (4) x 3 instances
    assert dep.request_settings.max_concurrent_requests_per_instance == 24
    assert dep.instance_count == 2
    assert ml.load_online_endpoint(out / "endpoint.yml").auth_mode == "aml_token"
    assert yaml.safe_load((out / "model.yml").read_text())["path"] == "../../model_repository"


def test_deploy_aks_heal_probe_model_reaches_the_healers_args_from_the_command_line(
    repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "k8s"
    model = sorted(p.parent.name for p in repo.glob("*/config.pbtxt"))[0]
    argv = ["deploy", "--target", "aks", "--dry-run", str(repo), "--model-repository", "pvc://models",
            "--monitoring", "none", "--autoscaler", "none", "-o", str(out),
            "--heal-image", "myacr.azurecr.io/tritonkit:0.1", "--heal-probe-model", model]  # fmt: skip
    assert run(argv) == 0
    docs = [d for p in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    args = containers["tritonkit-heal"]["args"]
    assert args[args.index("--probe-model") + 1] == model


def test_deploy_aks_dry_run_writes_manifests_when_inputs_are_valid(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "k8s"
    argv = [
        "deploy",
        "--target",
        "aks",
        "--dry-run",
        str(repo),
        "--model-repository",
        "as://acct01/models/triton",
        "-o",
        str(out),
        "--namespace",
        "serving",
        "--monitoring",
        "prometheus-operator",
        "--autoscaler",
        "hpa",
        "--hpa-metric",
        "queue",
        "--replicas",
        "2",
        "--gpu-count",
        "1",
        "--image",
        "nvcr.io/nvidia/tritonserver:24.09-py3",
    ]
    assert run(argv) == 0
    docs = [d for p in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "DaemonSet",
            "NetworkPolicy",
            "Namespace",
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "DaemonSet",
            "NetworkPolicy",
            "PodMonitor",
            "ServiceMonitor",
            "HorizontalPodAutoscaler",
            "PrometheusRule",
            "ConfigMap",
        ]
    )
    dep = next(d for d in docs if d["kind"] == "Deployment")
    # the HPA owns the replica count (from --replicas as its minimum); the Deployment leaves it out
    assert dep["metadata"]["namespace"] == "serving" and "replicas" not in dep["spec"]
    assert next(d for d in docs if d["kind"] == "HorizontalPodAutoscaler")["spec"]["minReplicas"] == 2
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":24.09-py3")


@pytest.mark.parametrize(
    ("argv_tail", "message"),
    [
        (["--target", "gcp"], "--target must be aml or aks"),
        (["--target", "aml", "--endpoint", "ep-one"], "needs --deployment, --instance-type"),
        (
            ["--target", "aml", "--endpoint", "9ep", "--deployment", "blue", "--instance-type", "X"],
            "endpoint name '9ep' is not valid",
        ),
        (
            [
                "--target",
                "aml",
                "--endpoint",
                "ep-one",
                "--deployment",
                "blue",
                "--instance-type",
                "X",
                "--traffic",
                "blue=50",
            ],
            "add up to 100",
        ),
        (["--target", "aks"], "needs --model-repository"),
        (["--target", "aks", "--model-repository", "s3://bucket/models"], "neither as://"),
        (
            ["--target", "aks", "--model-repository", "pvc://models", "--node-selector", "gpu"],
            "not KEY=VALUE",
        ),
        (["--target", "aks", "--model-repository", "pvc://models"], "needs --prometheus-query-endpoint"),
        (
            ["--target", "aks", "--model-repository", "pvc://models", "--monitoring", "none"],
            "needs a Prometheus",
        ),
    ],
)
def test_deploy_exits_1_without_writing_when_input_is_wrong(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv_tail: list[str], message: str
) -> None:
    out = tmp_path / "out"
    assert run(["deploy", str(repo), "--dry-run", "-o", str(out), *argv_tail]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_deploy_aks_dry_run_writes_a_helm_chart_when_format_helm(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "chart"
    argv = [
        "deploy",
        "--target",
        "aks",
        "--dry-run",
        str(repo),
        "--model-repository",
        "as://acct01/models/triton",
        "--prometheus-query-endpoint",
        "https://amw-1.westeurope.prometheus.monitor.azure.com",
        "--format",
        "helm",
        "-o",
        str(out),
    ]
    assert run(argv) == 0
    assert "nothing was deployed" in capsys.readouterr().out
    assert {"Chart.yaml", "values.yaml", "values.schema.json"} <= {p.name for p in out.iterdir()}
    assert (out / "templates" / "21-keda-scaledobject.yaml").is_file()
    values = yaml.safe_load((out / "values.yaml").read_text())
    assert values["prometheus"]["queryEndpoint"] == "https://amw-1.westeurope.prometheus.monitor.azure.com"


def test_write_artifacts_keeps_other_files_when_rewriting_a_directory(tmp_path: Path) -> None:
    out = tmp_path / "deploy" / "aks"
    out.mkdir(parents=True)
    (out / "README.md").write_text("hand-kept\n")
    (out / "a.yaml").write_text("old\n")
    plan = DeployPlan(
        target="aks", repository=tmp_path, artifacts=(Artifact("a.yaml", "new\n"), Artifact("b.yaml", "b\n"))
    )
    write_artifacts(plan, out)
    assert (out / "README.md").read_text() == "hand-kept\n"
    assert (out / "a.yaml").read_text() == "new\n" and (out / "b.yaml").read_text() == "b\n"
    assert [p.name for p in tmp_path.joinpath("deploy").iterdir()] == ["aks"]  # no temp dirs left


def test_write_artifacts_raises_when_output_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_text("a file\n")
    plan = DeployPlan(target="aml", repository=tmp_path, artifacts=(Artifact("model.yml", "x\n"),))
    with pytest.raises(DeployError, match="not a directory"):
        write_artifacts(plan, target)
    assert target.read_text() == "a file\n"


def test_deploy_aml_dry_run_exits_1_and_writes_nothing_when_a_model_is_decoupled(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decoupled = ADDER_CONFIG + "model_transaction_policy { decoupled: true }\n"
    (repo / "adder" / "config.pbtxt").write_text(decoupled)
    out = tmp_path / "out"
    argv = ["deploy", "--target", "aml", "--dry-run", str(repo), "-o", str(out)]
    argv += ["--endpoint", "triton-ep", "--deployment", "blue", "--instance-type", "Standard_NC6s_v3"]
    assert run(argv) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "cannot serve decoupled (streaming) models" in err and "model 'adder' is decoupled" in err
    assert "--target aks" in err and "Traceback" not in err
    assert not out.exists()


AML_ARGS = ["--endpoint", "triton-ep", "--deployment", "blue", "--instance-type", "Standard_NC6s_v3"]
AKS_ARGS = ["--model-repository", "pvc://models/triton", "--monitoring", "prometheus-operator"]
AKS_ARGS += ["--autoscaler", "hpa", "--hpa-metric", "cpu"]


@pytest.mark.parametrize(("target", "extra"), [("aml", AML_ARGS), ("aks", AKS_ARGS)])
def test_deploy_sub_command_and_target_alias_write_the_same_files(
    repo: Path, tmp_path: Path, target: str, extra: list[str]
) -> None:
    sub, alias, alias_eq = tmp_path / "sub", tmp_path / "alias", tmp_path / "alias_eq"
    assert run(["deploy", target, str(repo), "--dry-run", "-o", str(sub), *extra]) == 0
    assert run(["deploy", str(repo), "--target", target, "--dry-run", "-o", str(alias), *extra]) == 0
    assert run(["deploy", str(repo), f"--target={target}", "--dry-run", "-o", str(alias_eq), *extra]) == 0
    files = sorted(str(p.relative_to(sub)) for p in sub.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(alias)) for p in alias.rglob("*") if p.is_file())
    for name in files:
        assert (sub / name).read_text() == (alias / name).read_text() == (alias_eq / name).read_text()


@pytest.mark.parametrize(
    ("argv_tail", "message"),
    [
        (["aml", "--endpoint", "ep-one"], "needs --deployment, --instance-type"),
        (["aks"], "needs --model-repository"),
        (["aks", "--model-repository", "pvc://models", "--node-selector", "gpu"], "not KEY=VALUE"),
    ],
)
def test_deploy_sub_commands_exit_1_without_writing_when_input_is_wrong(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv_tail: list[str], message: str
) -> None:
    out = tmp_path / "out"
    target, *rest = argv_tail
    assert run(["deploy", target, str(repo), "--dry-run", "-o", str(out), *rest]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_deploy_sub_commands_refuse_the_other_targets_options(repo: Path, tmp_path: Path) -> None:
    # `deploy aml` has no AKS option: Click refuses it (usage error, exit 2) instead of ignoring it
    argv = ["deploy", "aml", str(repo), "--dry-run", "-o", str(tmp_path / "o"), *AML_ARGS, "--replicas", "2"]
    assert run(argv) == 2


def test_alias_target_rewrites_only_the_target_option() -> None:
    from tritonkit.cli.deploy import alias_target

    assert alias_target(["R", "--target", "aks", "-o", "x"]) == ["aks", "R", "-o", "x"]
    assert alias_target(["R", "--target=aml"]) == ["aml", "R"]
    assert alias_target(["aks", "R"]) == ["aks", "R"]
    assert alias_target(["--help"]) == ["--help"]


def test_deploy_aks_pins_images_from_flags_and_lock_file_when_digests_are_given(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    digest = "sha256:" + "cd" * 32
    lock = tmp_path / "images.lock.yaml"
    lock.write_text("nvcr.io/nvidia/k8s-device-plugin:v0.17.0: " + digest + "\n")
    out = tmp_path / "k8s"
    base = ["deploy", "aks", "--dry-run", str(repo), "--model-repository", "as://acct01/models/triton"]
    base += ["--monitoring", "none", "--autoscaler", "none", "-o", str(out)]
    pin = f"nvcr.io/nvidia/tritonserver:24.10-py3={digest}"
    assert run([*base, "--image-digest", pin, "--image-lock", str(lock)]) == 0
    shown = capsys.readouterr()
    assert "wrote" in shown.out + shown.err and "pinned by digest" not in shown.out + shown.err
    images = [
        c["image"]
        for p in sorted(out.glob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
        if d["kind"] in ("Deployment", "DaemonSet")
        for c in d["spec"]["template"]["spec"]["containers"]
    ]
    assert images and all(i.endswith("@" + digest) for i in images)
    assert run([*base, "--image-digest", "nvcr.io/nvidia/tritonserver:24.10-py3=latest"]) == 1
    shown = capsys.readouterr()
    assert "IMAGE=sha256" in shown.out + shown.err


def _aks_docs(repo: Path, out: Path, *flags: str) -> list[dict[str, Any]]:
    base = ["deploy", "aks", "--dry-run", str(repo), "--model-repository", "pvc://models", "-o", str(out)]
    assert run([*base, "--monitoring", "none", "--autoscaler", "none", *flags]) == 0
    return [d for p in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]


def test_deploy_aks_no_flags_leave_out_their_objects_and_limits_follow_requests_when_given(
    repo: Path, tmp_path: Path
) -> None:
    # each --no-X flag turns AksOptions' X off; --cpu-limit/--memory-limit default to the requests
    full = _aks_docs(repo, tmp_path / "full")
    assert {"NetworkPolicy", "PodDisruptionBudget", "DaemonSet"} <= {d["kind"] for d in full}
    off = ["--no-network-policy", "--no-pod-disruption-budget", "--no-device-plugin", "--no-gpu-toleration"]
    lean = _aks_docs(repo, tmp_path / "lean", *off, "--cpu-request", "2", "--memory-request", "8Gi")
    assert sorted(d["kind"] for d in lean) == ["Deployment", "Namespace", "Service"]
    pod = next(d for d in lean if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    resources = pod["containers"][0]["resources"]
    assert resources["limits"]["cpu"] == resources["requests"]["cpu"] == "2"
    assert resources["limits"]["memory"] == resources["requests"]["memory"] == "8Gi"
    assert "tolerations" not in pod
