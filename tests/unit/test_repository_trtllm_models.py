"""The TensorRT-LLM layout's Python models (tokenizer, detokenizer, BLS) run outside Triton.

Fakes, because the real parts cannot run here: ``triton_python_backend_utils`` exists only inside
Triton's Python stub process, TensorRT-LLM engines need a GPU, and ``transformers`` is not a
tritonkit dependency (the -trtllm-python-py3 image ships it). So a small stand-in for
pb_utils records what the models send, a character-level tokenizer stands in for AutoTokenizer
(its ``from_pretrained`` records the directory the model resolved), and the BLS test answers
the engine model's request with the prompt's ids followed by a fixed completion. What is tested
is tritonkit's own code: path resolution, batching, padding, the word-list format, BLS wiring
and per-request errors.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

MODELS = Path(__file__).resolve().parents[2] / "tritonkit" / "triton_side" / "trtllm_models"
TRITON_SIDE_DIR = MODELS.parent
BOS, EOS = 1, 2


class _Tensor:
    def __init__(self, name: str, array: Any) -> None:
        self._name, self._array = name, np.asarray(array)

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> Any:
        return self._array


class _Error:
    def __init__(self, message: str) -> None:
        self._message = message

    def message(self) -> str:
        return self._message


class _Response:
    def __init__(self, output_tensors: list[_Tensor] | None = None, error: _Error | None = None) -> None:
        self.output_tensors = {t.name(): t for t in output_tensors or []}
        self.error_ = error

    def has_error(self) -> bool:
        return self.error_ is not None

    def error(self) -> _Error | None:
        return self.error_


class _Request:
    def __init__(self, tensors: dict[str, Any]) -> None:
        self.tensors = {k: _Tensor(k, v) for k, v in tensors.items()}


def _pb_utils(route: dict[str, Any]) -> types.ModuleType:
    pb = types.ModuleType("triton_python_backend_utils")
    pb.Tensor = _Tensor  # type: ignore[attr-defined]
    pb.TritonError = _Error  # type: ignore[attr-defined]
    pb.InferenceResponse = _Response  # type: ignore[attr-defined]
    pb.TritonModelException = RuntimeError  # type: ignore[attr-defined]
    pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1  # type: ignore[attr-defined]
    pb.get_input_tensor_by_name = lambda r, n: r.tensors.get(n)  # type: ignore[attr-defined]
    pb.get_output_tensor_by_name = lambda r, n: r.output_tensors.get(n)  # type: ignore[attr-defined]
    pb.using_decoupled_model_transaction_policy = (  # type: ignore[attr-defined]
        lambda cfg: bool(cfg.get("model_transaction_policy", {}).get("decoupled"))
    )

    class InferenceRequest:
        def __init__(
            self, *, model_name: str, requested_output_names: list[str], inputs: list[_Tensor]
        ) -> None:
            self.model_name, self.inputs = model_name, {t.name(): t.as_numpy() for t in inputs}

        def exec(self) -> _Response:
            return route[self.model_name](self.inputs)

    pb.InferenceRequest = InferenceRequest  # type: ignore[attr-defined]
    return pb


class _CharTokenizer:
    """Character-level stand-in for a Hugging Face tokenizer (ids = code points, BOS 1, EOS 2)."""

    loaded_from: list[str] = []

    def __init__(self) -> None:
        self.eos_token, self.pad_token, self.eos_token_id = "</s>", None, EOS

    @classmethod
    def from_pretrained(cls, path: str, **_: Any) -> _CharTokenizer:
        cls.loaded_from.append(path)
        return cls()

    @property
    def pad_token_id(self) -> int:
        return EOS

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return ([BOS] if add_special_tokens else []) + [ord(c) for c in text]

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids if not (skip_special_tokens and int(i) in (BOS, EOS)))


def _load(name: str, monkeypatch: pytest.MonkeyPatch, route: dict[str, Any] | None = None) -> Any:
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _pb_utils(route or {}))
    monkeypatch.syspath_prepend(str(TRITON_SIDE_DIR))  # bls_streams.py, shipped beside bls.py
    monkeypatch.syspath_prepend(str(MODELS))  # served_paths.py, shipped beside the models reading a dir
    transformers = types.ModuleType("transformers")
    transformers.AutoTokenizer = _CharTokenizer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    spec = importlib.util.spec_from_file_location(f"_trtllm_{name}", MODELS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _init(module: Any, model_dir: Path, parameters: dict[str, str], **config: Any) -> Any:
    model = module.TritonPythonModel()
    cfg = {"parameters": {k: {"string_value": v} for k, v in parameters.items()}, **config}
    model.initialize(
        {"model_config": json.dumps(cfg), "model_repository": str(model_dir), "model_version": "1"}
    )
    return model


def _text(*values: str) -> Any:
    return np.array([[v.encode()] for v in values], dtype=np.object_)


def test_preprocessing_maps_the_served_tokenizer_path_onto_its_version_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_dir = tmp_path / "decoder_preprocessing"
    (model_dir / "1" / "tokenizer").mkdir(parents=True)
    module = _load("preprocessing", monkeypatch)
    _init(module, model_dir, {"tokenizer_dir": "/models/decoder_preprocessing/1/tokenizer"})
    assert _CharTokenizer.loaded_from[-1] == str(model_dir / "1" / "tokenizer")


def test_preprocessing_pads_a_batch_and_writes_word_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _load("preprocessing", monkeypatch)
    model = _init(module, tmp_path / "pre", {"tokenizer_dir": "tok"})
    request = _Request(
        {
            "QUERY": _text("hi", "hello"),
            "REQUEST_OUTPUT_LEN": np.array([[4], [4]], dtype=np.int32),
            "STOP_WORDS_DICT": np.array([[b"ab", b"c"], [b"", b""]], dtype=np.object_),
            "END_ID": np.array([[7], [8]], dtype=np.int32),
        }
    )
    (response,) = model.execute([request])
    out = {k: t.as_numpy() for k, t in response.output_tensors.items()}
    assert out["INPUT_ID"].shape == (2, 6)
    assert out["INPUT_ID"][0].tolist() == [BOS, ord("h"), ord("i"), EOS, EOS, EOS]
    assert out["REQUEST_INPUT_LEN"].tolist() == [[3], [6]]
    assert out["OUT_END_ID"].tolist() == [[7], [8]] and out["OUT_PAD_ID"].tolist() == [[EOS], [EOS]]
    stop = out["STOP_WORDS_IDS"]
    assert stop.shape == (2, 2, 3)
    assert stop[0].tolist() == [[ord("a"), ord("b"), ord("c")], [2, 3, -1]]
    assert stop[1].tolist() == [[0, 0, 0], [-1, -1, -1]]
    assert out["BAD_WORDS_IDS"].shape == (2, 2, 1)


def test_preprocessing_prepends_prompt_table_ids_for_image_embeddings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _load("preprocessing", monkeypatch)
    model = _init(module, tmp_path / "pre", {"tokenizer_dir": "tok", "vocab_size": "1000"})
    request = _Request(
        {
            "QUERY": _text("x"),
            "REQUEST_OUTPUT_LEN": np.array([[4]], dtype=np.int32),
            "PROMPT_VOCAB_SIZE": np.array([[3]], dtype=np.int32),
        }
    )
    (response,) = model.execute([request])
    assert response.output_tensors["INPUT_ID"].as_numpy()[0].tolist() == [1000, 1001, 1002, BOS, ord("x")]


def test_preprocessing_fails_only_the_bad_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load("preprocessing", monkeypatch)
    model = _init(module, tmp_path / "pre", {"tokenizer_dir": "tok"})
    good = _Request({"QUERY": _text("ok"), "REQUEST_OUTPUT_LEN": np.array([[2]], dtype=np.int32)})
    bad = _Request({"QUERY": _text("no length")})
    responses = model.execute([bad, good])
    assert responses[0].has_error() and "REQUEST_OUTPUT_LEN" in responses[0].error().message()
    assert not responses[1].has_error()


def test_postprocessing_decodes_each_beam_to_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _load("postprocessing", monkeypatch)
    model = _init(module, tmp_path / "post", {"tokenizer_dir": "tok", "skip_special_tokens": "true"})
    tokens = np.array([[[BOS, ord("o"), ord("k"), EOS, 0]]], dtype=np.int32)
    request = _Request({"TOKENS_BATCH": tokens, "SEQUENCE_LENGTH": np.array([[3]], dtype=np.int32)})
    (response,) = model.execute([request])
    assert response.output_tensors["OUTPUT"].as_numpy().tolist() == [[b"ok"]]


def test_bls_calls_the_models_its_parameters_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    route: dict[str, Any] = {}
    pre = _init(_load("preprocessing", monkeypatch), tmp_path / "p", {"tokenizer_dir": "tok"})
    post = _init(_load("postprocessing", monkeypatch), tmp_path / "q", {"tokenizer_dir": "tok"})
    calls: list[str] = []

    def run(model: Any, name: str) -> Any:
        def call(inputs: dict[str, Any]) -> _Response:
            calls.append(name)
            (response,) = model.execute([_Request(inputs)])
            return response

        return call

    def engine(inputs: dict[str, Any]) -> _Response:
        calls.append("llm")
        assert not inputs["streaming"].any()
        ids = inputs["input_ids"][0, : int(inputs["input_lengths"][0, 0])]
        out = np.concatenate([ids, [ord("!")]])[np.newaxis, np.newaxis].astype(np.int32)
        return _Response(
            [_Tensor("output_ids", out), _Tensor("sequence_length", np.array([[out.shape[-1]]]))]
        )

    route.update({"pre": run(pre, "pre"), "llm": engine, "post": run(post, "post")})
    bls_module = _load("bls", monkeypatch, route)
    bls = _init(
        bls_module,
        tmp_path / "bls",
        {
            "preprocessing_model_name": "pre",
            "tensorrt_llm_model_name": "llm",
            "postprocessing_model_name": "post",
        },
    )
    request = _Request({"text_input": np.array([b"hey"], dtype=np.object_), "max_tokens": np.array([1])})
    (response,) = bls.execute([request])
    assert calls == ["pre", "llm", "post"]
    assert response.output_tensors["text_output"].as_numpy().tolist() == [b"hey!"]
    stream = _Request({**{k: t.as_numpy() for k, t in request.tensors.items()}, "stream": np.array([True])})
    (refused,) = bls.execute([stream])
    assert refused.has_error() and "decoupled" in refused.error().message()
