"""The one model signature shared by the client, perf and tune."""

from __future__ import annotations

from tritonkit.client._inputs import ModelInfo
from tritonkit.perf.inputs import model_inputs_from_metadata
from tritonkit.signature import ModelSignature, TensorInfo

META = {
    "name": "scorer",
    "inputs": [
        {"name": "TEXTURE", "datatype": "FP32", "shape": ["-1", "13", "224", "224"]},
        {"name": "MASK", "datatype": "TYPE_BOOL", "shape": ["-1", "-1"]},
    ],
    "outputs": [{"name": "SCORE", "datatype": "FP32", "shape": ["-1", "14", "14"]}],
}
CONFIG = {"config": {"max_batch_size": "8", "input": [{"name": "MASK", "optional": True}]}}


def test_signature_reads_grpc_json_drops_the_batch_dim_and_marks_optional_inputs() -> None:
    sig = ModelSignature.from_metadata(META, CONFIG, version="1")
    assert sig.batching and sig.max_batch_size == 8 and sig.version == "1"
    assert sig.inputs == (
        TensorInfo("TEXTURE", "FP32", (13, 224, 224)),
        TensorInfo("MASK", "BOOL", (-1,), optional=True),
    )
    assert sig.output_names == ("SCORE",)
    assert sig.inputs[1].variable and sig.inputs[0].fixed
    assert sig.find_input("NOPE") is None


def test_client_and_perf_describe_a_model_with_the_same_signature() -> None:
    client = ModelInfo.from_metadata(META, CONFIG, version="")
    perf = model_inputs_from_metadata(META, CONFIG)
    assert isinstance(client, ModelSignature) and type(perf) is ModelSignature
    assert (client.inputs, client.outputs, client.max_batch_size) == (
        perf.inputs,
        perf.outputs,
        perf.max_batch_size,
    )
    assert client.input_map["TEXTURE"] is client.inputs[0] and client.required == frozenset({"TEXTURE"})


def test_signature_reads_the_decoupled_transaction_policy_from_http_and_grpc_configs() -> None:
    http_cfg = {"max_batch_size": 0, "model_transaction_policy": {"decoupled": True}}
    grpc_cfg = {"config": {"model_transaction_policy": {"decoupled": True}}}
    assert ModelSignature.from_metadata(META, http_cfg).decoupled
    assert ModelSignature.from_metadata(META, grpc_cfg).decoupled
    assert not ModelSignature.from_metadata(META, CONFIG).decoupled
