"""`tritonkit serve REPO --openai-port P`: the front beside the server the command starts.

Two tiny Python pipelines the test writes (no engine): ``echo_stream`` (decoupled: one response
per word, at most MAX_TOKENS words) and ``echo_unary`` (one response), each with the ``openai.*``
parameters ``openai_parameters`` makes from a spec's ``openai:`` mapping.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.integration.test_server_cli import ServeProcess
from tests.integration.test_server_local import processes_mentioning, wait_until
from tritonkit.openai_front import openai_parameters

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.integration

KEY = "sk-serve-cli-key"

MODEL = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _text(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0].decode()


def _answer(text):
    tensor = pb_utils.Tensor("ANSWER", np.array([text.encode()], dtype=np.object_))
    return pb_utils.InferenceResponse([tensor])


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = config.get("model_transaction_policy", {}).get("decoupled", False)

    def execute(self, requests):
        if not self.decoupled:
            return [_answer("echo: " + _text(r, "TEXT")) for r in requests]
        for request in requests:
            sender = request.get_response_sender()
            words = _text(request, "TEXT").split()
            limit = pb_utils.get_input_tensor_by_name(request, "MAX_TOKENS")
            if limit is not None:
                words = words[: int(limit.as_numpy().reshape(-1)[0])]
            for word in words:
                sender.send(_answer(word + " "))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def _config(name: str, decoupled: bool) -> str:
    inputs = ["TEXT", "MAX_TOKENS"] if decoupled else ["TEXT"]
    mapping = {"text_input": "TEXT", "text_output": "ANSWER"}
    if decoupled:
        mapping["max_tokens_input"] = "MAX_TOKENS"
    params = openai_parameters(mapping, model=name, inputs=inputs, outputs=["ANSWER"], decoupled=decoupled)
    lines = [
        f'name: "{name}"',
        'backend: "python"',
        "max_batch_size: 0",
        'input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]',
        'output [ { name: "ANSWER" data_type: TYPE_STRING dims: [ 1 ] } ]',
        "instance_group [ { kind: KIND_CPU count: 1 } ]",
    ]
    if decoupled:
        lines.insert(4, 'input [ { name: "MAX_TOKENS" data_type: TYPE_INT32 dims: [ 1 ] optional: true } ]')
        lines.append("model_transaction_policy { decoupled: true }")
    lines += [f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}' for k, v in params.items()]
    return "\n".join(lines) + "\n"


def _repository(root: Path) -> Path:
    for name, decoupled in (("echo_stream", True), ("echo_unary", False)):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(MODEL)
        (root / name / "config.pbtxt").write_text(_config(name, decoupled))
    return root


def test_serve_with_openai_port_answers_mapped_pipelines_and_stops_with_the_server(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    keys = tmp_path / "keys.txt"
    keys.write_text(KEY + "\n")
    serve = ServeProcess(str(repo), "--openai-port", "0", "--openai-api-key-file", str(keys))
    try:
        url = serve.wait_for(r"OpenAI\s+(http://127\.0\.0\.1:\d+/v1)").group(1)
        serve.wait_for("serving; press Ctrl-C")
        client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=120)
        assert {m.id for m in client.models.list()} == {"echo_stream", "echo_unary"}
        words = "one two three four five"
        streamed = client.chat.completions.create(
            model="echo_stream", messages=[{"role": "user", "content": words}], max_tokens=2, stream=True
        )
        chunks = [c for c in streamed if c.choices]
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "one two "
        assert chunks[-1].choices[0].finish_reason == "length"  # 2 responses reached max_tokens=2
        whole = client.chat.completions.create(
            model="echo_stream", messages=[{"role": "user", "content": words}]
        )
        assert whole.choices[0].message.content == words + " " and whole.choices[0].finish_reason == "stop"
        unary = client.completions.create(model="echo_unary", prompt="hello")
        assert unary.choices[0].text == "echo: hello" and unary.usage is None
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url, api_key="wrong", max_retries=0).models.list()
        code = serve.stop(signal.SIGINT)
    finally:
        serve.kill()
    assert code == 0, serve.output
    assert KEY not in serve.output
    assert re.search(r"tritonserver stopped \(SIGINT\)", serve.output)
    assert wait_until(lambda: not processes_mentioning(str(repo)), 10), "tritonserver left behind"
