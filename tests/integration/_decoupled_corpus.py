"""Decoupled models and ensembles over them, legal and refused, for the verdict tests.

Two come from Triton's own QA (server qa/L0_model_config/autofill_noplatform/ensemble/
``invalid_decoupled_branching`` and ``invalid_decoupled_branching_2``, with their ``expected``
messages); the QA's custom ``repeat_int32`` backend and ``int32_dim1_nobatch_output2`` model are
re-made here as Python models with the same signatures. The rest are the shapes a streaming
pipeline meets: a decoupled step first, last, fanned out and joined, beside the request's own
tensors, two decoupled outputs, nested ensembles, an ensemble whose own config disagrees with
its steps, the response cache, decoupled with each batcher. Built on the validator base fixture
(``onnx_m``, ``py_m``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.integration._verdict_corpus import PY_MODEL, SEQUENCE, Writer, files, python_model

DECOUPLED = "model_transaction_policy { decoupled: true }\n"

#: a decoupled echo: two responses per request, then the final flag alone
STREAM_MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            for _ in range(2):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor(n, x) for n in OUTPUTS]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

JOIN_MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            outputs = [pb_utils.Tensor("OUTPUT0", a + b)]
            if OUTPUT1:
                outputs.append(pb_utils.Tensor("OUTPUT1", a - b))
            out.append(pb_utils.InferenceResponse(outputs))
        return out
"""

#: the QA's repeat backend: one response per element of IN (OUT = the element, IDX = its index)
REPEAT_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            for i, v in enumerate(values):
                sender.send(pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUT", np.array([v], np.int32)),
                    pb_utils.Tensor("IDX", np.array([i], np.uint32)),
                ]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

REPEAT_CONFIG = """name: "repeat_int32"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
  { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] }
]
output [
  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }
]
instance_group [{ kind: KIND_CPU }]
"""

NOBATCH_OUTPUT2_CONFIG = """name: "int32_dim1_nobatch_output2"
backend: "python"
max_batch_size: 0
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 1 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 1 ] }
]
instance_group [{ kind: KIND_CPU }]
"""

_QA_INPUTS = """input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
  { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] }
]
"""
_REPEAT_IN = (
    'input_map { key: "IN" value: "IN" } input_map { key: "DELAY" value: "DELAY" } '
    'input_map { key: "WAIT" value: "WAIT" } '
)

#: qa/L0_model_config/autofill_noplatform/ensemble/invalid_decoupled_branching (same wiring)
QA_BRANCHING = (
    'name: "invalid_decoupled_branching"\nmax_batch_size: 0\nplatform: "ensemble"\n'
    "ensemble_scheduling {\n  step [\n"
    f'    {{ model_name: "repeat_int32" model_version: -1 {_REPEAT_IN}'
    'output_map { key: "OUT" value: "repeat_1_out" } },\n'
    f'    {{ model_name: "repeat_int32" model_version: -1 {_REPEAT_IN}'
    'output_map { key: "OUT" value: "repeat_2_out" } },\n'
    '    { model_name: "int32_dim1_nobatch_output2" model_version: -1\n'
    '      input_map { key: "INPUT0" value: "repeat_1_out" }\n'
    '      input_map { key: "INPUT1" value: "repeat_2_out" }\n'
    '      output_map { key: "OUTPUT0" value: "identity_0" }\n'
    '      output_map { key: "OUTPUT1" value: "identity_1" } },\n'
    '    { model_name: "int32_dim1_nobatch_output2" model_version: -1\n'
    '      input_map { key: "INPUT0" value: "identity_0" } input_map { key: "INPUT1" value: "identity_1" }\n'
    '      output_map { key: "OUTPUT0" value: "OUT" } }\n'
    "  ]\n}\n" + _QA_INPUTS + 'output [{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }]\n'
)

#: qa/L0_model_config/autofill_noplatform/ensemble/invalid_decoupled_branching_2 (same wiring)
QA_BRANCHING_2 = (
    'name: "invalid_decoupled_branching_2"\nmax_batch_size: 0\nplatform: "ensemble"\n'
    "ensemble_scheduling {\n  step [\n"
    f'    {{ model_name: "repeat_int32" model_version: -1 {_REPEAT_IN}'
    'output_map { key: "OUT" value: "OUT" } },\n'
    f'    {{ model_name: "repeat_int32" model_version: -1 {_REPEAT_IN}'
    'output_map { key: "IDX" value: "IDX" } }\n'
    "  ]\n}\n" + _QA_INPUTS + "output [\n"
    '  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },\n'
    '  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }\n]\n'
)

#: the QA's ``expected`` files, verbatim
QA_EXPECTED = {
    "invalid_decoupled_branching": "in ensemble invalid_decoupled_branching, step of model "
    "'int32_dim1_nobatch_output2' receives inputs originated from different decoupled models",
    "invalid_decoupled_branching_2": "in ensemble invalid_decoupled_branching_2, step of model "
    "'invalid_decoupled_branching_2' receives inputs originated from different decoupled models",
}


def stream_model(
    name: str, body: str = "", *, outputs: tuple[str, ...] = ("OUTPUT0",), mbs: int = 8
) -> Writer:
    """A decoupled Python model INPUT0 -> ``outputs`` (FP32 [4]), two responses a request."""
    more = "".join(f'output {{ name: "{o}" data_type: TYPE_FP32 dims: [4] }}\n' for o in outputs[1:])
    code = STREAM_MODEL.replace("OUTPUTS", repr(list(outputs)))
    return python_model(name, DECOUPLED + more + body, code=code, mbs=mbs)


#: a model that makes itself decoupled in auto_complete_config, its config saying nothing of it
AUTO_DECOUPLED = """
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.set_model_transaction_policy(dict(decoupled=True))
        return auto_complete_model_config
"""


def auto_decoupled_model(name: str) -> Writer:
    """stream_model's code, decoupled only through its auto_complete_config (Triton's default
    auto-complete applies it)."""
    return python_model(name, code=STREAM_MODEL.replace("OUTPUTS", "['OUTPUT0']") + AUTO_DECOUPLED)


def join_model(name: str, *, two_outputs: bool = False) -> Writer:
    """A plain Python model INPUT0 + INPUT1 -> OUTPUT0 (and OUTPUT1), FP32 [4]."""
    body = 'input { name: "INPUT1" data_type: TYPE_FP32 dims: [4] }\n'
    if two_outputs:
        body += 'output { name: "OUTPUT1" data_type: TYPE_FP32 dims: [4] }\n'
    return python_model(name, body, code=JOIN_MODEL.replace("OUTPUT1:", f"{two_outputs}:"))


def qa_ensemble(name: str, config: str) -> Writer:
    def write(repo: Path) -> None:
        (repo / name / "1").mkdir(parents=True, exist_ok=True)
        (repo / name / "config.pbtxt").write_text(config)

    return write


Step = tuple[str, Mapping[str, str], Mapping[str, str]]


def ensemble(
    name: str, steps: list[Step], *, outputs: tuple[str, ...] = ("OUT",), mbs: int = 8, extra: str = ""
) -> Writer:
    """An ensemble IN (FP32 [4]) -> ``outputs`` (FP32 [4]); steps are (model, inputs, outputs)
    with member tensor -> ensemble tensor maps."""

    def write(repo: Path) -> None:
        text = ""
        for model, ins, outs in steps:
            text += f'  step {{ model_name: "{model}" model_version: -1 '
            text += "".join(f'input_map {{ key: "{k}" value: "{v}" }} ' for k, v in ins.items())
            text += "".join(f'output_map {{ key: "{k}" value: "{v}" }} ' for k, v in outs.items())
            text += "}\n"
        (repo / name / "1").mkdir(parents=True, exist_ok=True)
        (repo / name / "config.pbtxt").write_text(
            f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {mbs}\n'
            'input { name: "IN" data_type: TYPE_FP32 dims: [4] }\n'
            + "".join(f'output {{ name: "{o}" data_type: TYPE_FP32 dims: [4] }}\n' for o in outputs)
            + extra
            + f"ensemble_scheduling {{\n{text}}}\n"
        )

    return write


def _in(tensor: str = "IN", key: str = "INPUT0") -> dict[str, str]:
    return {key: tensor}


def _out(tensor: str, key: str = "OUTPUT0") -> dict[str, str]:
    return {key: tensor}


_JOIN_AB = {"INPUT0": "a", "INPUT1": "b"}

LEGAL: dict[str, Writer] = {
    "dec_stream": stream_model("dec_stream"),
    "dec_stream_two": stream_model("dec_stream_two", outputs=("OUTPUT0", "OUTPUT1")),
    "dec_dynamic_batching": stream_model(
        "dec_dynamic_batching", "dynamic_batching { max_queue_delay_microseconds: 100 }\n"
    ),
    "dec_nobatch": stream_model("dec_nobatch", mbs=0),
    "dec_sequence": stream_model("dec_sequence", SEQUENCE),
    "dec_join": join_model("dec_join"),
    "dec_auto_complete": auto_decoupled_model("dec_auto_complete"),
    # loads, then fails every request: execute() returns responses although the model is decoupled
    "dec_returns_responses": python_model("dec_returns_responses", DECOUPLED, code=PY_MODEL),
    "repeat_int32": files(
        {"repeat_int32/config.pbtxt": REPEAT_CONFIG, "repeat_int32/1/model.py": REPEAT_MODEL}
    ),
    "int32_dim1_nobatch_output2": files(
        {
            "int32_dim1_nobatch_output2/config.pbtxt": NOBATCH_OUTPUT2_CONFIG,
            "int32_dim1_nobatch_output2/1/model.py": JOIN_MODEL.replace("OUTPUT1:", "True:"),
        }
    ),
    "dens_last": ensemble(
        "dens_last", [("onnx_m", {"x": "IN"}, {"y": "mid"}), ("dec_stream", _in("mid"), _out("OUT"))]
    ),
    "dens_first": ensemble(
        "dens_first", [("dec_stream", _in(), _out("mid")), ("py_m", _in("mid"), _out("OUT"))]
    ),
    "dens_config_false": ensemble(
        "dens_config_false",
        [("dec_stream", _in(), _out("OUT"))],
        extra="model_transaction_policy { decoupled: false }\n",
    ),
    "dens_config_true_unary": ensemble(
        "dens_config_true_unary", [("py_m", _in(), _out("OUT"))], extra=DECOUPLED
    ),
    "dens_siblings_joined": ensemble(
        "dens_siblings_joined",
        [
            ("dec_stream_two", _in(), {"OUTPUT0": "a", "OUTPUT1": "b"}),
            ("dec_join", _JOIN_AB, _out("OUT")),
        ],
    ),
    "dens_fan_out_join": ensemble(
        "dens_fan_out_join",
        [
            ("dec_stream", _in(), _out("d")),
            ("py_m", _in("d"), _out("a")),
            ("onnx_m", {"x": "d"}, {"y": "b"}),
            ("dec_join", _JOIN_AB, _out("OUT")),
        ],
    ),
    "dens_sibling_outputs": ensemble(
        "dens_sibling_outputs",
        [("dec_stream_two", _in(), {"OUTPUT0": "OUT", "OUTPUT1": "OUT2"})],
        outputs=("OUT", "OUT2"),
    ),
    "dens_nested": ensemble("dens_nested", [("dens_last", {"IN": "IN"}, {"OUT": "OUT"})]),
    "dens_over_auto_complete": ensemble(
        "dens_over_auto_complete", [("dec_auto_complete", _in(), _out("OUT"))]
    ),
    "dens_nested_unary_pair": ensemble(
        "dens_nested_unary_pair",
        [
            ("dens_config_true_unary", {"IN": "IN"}, {"OUT": "a"}),
            ("dens_config_true_unary", {"IN": "IN"}, {"OUT": "b"}),
            ("dec_join", _JOIN_AB, _out("OUT")),
        ],
    ),
}

BROKEN: dict[str, Writer] = {
    "invalid_decoupled_branching": qa_ensemble("invalid_decoupled_branching", QA_BRANCHING),
    "invalid_decoupled_branching_2": qa_ensemble("invalid_decoupled_branching_2", QA_BRANCHING_2),
    "dec_response_cache": stream_model("dec_response_cache", "response_cache { enable: true }\n"),
    "dens_response_cache": ensemble(
        "dens_response_cache", [("dec_stream", _in(), _out("OUT"))], extra="response_cache { enable: true }\n"
    ),
    "dens_stream_and_request": ensemble(
        "dens_stream_and_request",
        [("dec_stream", _in(), _out("d")), ("dec_join", {"INPUT0": "d", "INPUT1": "IN"}, _out("j")),
         ("py_m", _in("j"), _out("OUT"))],
    ),
    "dens_stream_and_request_to_output": ensemble(
        "dens_stream_and_request_to_output",
        [("dec_stream", _in(), _out("d")), ("dec_join", {"INPUT0": "d", "INPUT1": "IN"}, _out("OUT"))],
    ),
    "dens_two_streams_joined": ensemble(
        "dens_two_streams_joined",
        [("dec_stream", _in(), _out("a")), ("dec_stream", _in(), _out("b")),
         ("dec_join", _JOIN_AB, _out("j")), ("py_m", _in("j"), _out("OUT"))],
    ),
    "dens_two_streams_joined_reversed": ensemble(
        "dens_two_streams_joined_reversed",
        [("dec_join", _JOIN_AB, _out("j")), ("py_m", _in("j"), _out("OUT")), ("dec_stream", _in(), _out("a")),
         ("dec_stream", _in(), _out("b"))],
    ),
    "dens_outputs_stream_and_unary": ensemble(
        "dens_outputs_stream_and_unary",
        [("dec_stream", _in(), _out("OUT")), ("py_m", _in(), _out("OUT2"))],
        outputs=("OUT", "OUT2"),
    ),
    "dens_nested_streams_joined": ensemble(
        "dens_nested_streams_joined",
        [("dens_last", {"IN": "IN"}, {"OUT": "a"}), ("dens_first", {"IN": "IN"}, {"OUT": "b"}),
         ("dec_join", _JOIN_AB, _out("OUT"))],
    ),
}  # fmt: skip
