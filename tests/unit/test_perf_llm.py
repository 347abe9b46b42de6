"""LLM load shaping: exact prompt lengths, exact output-length requests, dataset replay, seeds."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

import numpy as np
import pytest

from tritonkit.errors import PerfError
from tritonkit.perf.llm import (
    Length,
    LlmLoad,
    PromptTokenizer,
    build_requests,
    find_tokenizer,
    parse_length,
    prompt_counts,
    read_dataset,
    synthetic_prompts,
)
from tritonkit.perf.stream_metrics import Timeline, summarize_stream, timeline_record
from tritonkit.signature import ModelSignature, TensorInfo

CORPUS = (
    "the quick brown fox jumps over the lazy dog while a model streams tokens to many clients; "
    "prompts of real length and outputs of exact length make a benchmark of an engine honest. "
) * 20


def _byte_level_bpe(path: Path) -> Path:
    """A small byte-level BPE tokenizer with a BOS token added to every prompt, as Llama-style
    tokenizers do (merges make decode/encode round trips change lengths: the hard case)."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([CORPUS], trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    out = path / "tokenizer.json"
    tok.save(str(out))
    return out


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _byte_level_bpe(tmp_path_factory.mktemp("tok"))


def _vllm_signature() -> ModelSignature:
    def t(name: str, dtype: str, optional: bool = True) -> TensorInfo:
        return TensorInfo(name, dtype, (1,), optional)

    return ModelSignature(
        name="tiny_llm",
        version="1",
        max_batch_size=0,
        inputs=(
            t("text_input", "BYTES", False),
            t("stream", "BOOL"),
            t("sampling_parameters", "BYTES"),
            t("exclude_input_in_output", "BOOL"),
            t("return_num_input_tokens", "BOOL"),
            t("return_num_output_tokens", "BOOL"),
        ),
        outputs=(TensorInfo("text_output", "BYTES", (-1,)), TensorInfo("num_output_tokens", "UINT32", (-1,))),
    )


def test_parse_length_reads_mean_and_stddev() -> None:
    assert parse_length("512", "--prompt-tokens") == Length(512, 0.0)
    assert parse_length("512,128", "--prompt-tokens") == Length(512, 128.0)


@pytest.mark.parametrize("bad", ["", "x", "0", "5,-1", "1,2,3", "2.5"])
def test_parse_length_refuses_what_is_not_mean_stddev(bad: str) -> None:
    with pytest.raises(PerfError, match="--output-tokens"):
        parse_length(bad, "--output-tokens")


@pytest.mark.parametrize("tokens", [2, 3, 7, 16, 64, 257])
def test_prompt_tokenizer_makes_prompts_of_exactly_the_asked_length(
    tokenizer_file: Path, tokens: int
) -> None:
    tok = PromptTokenizer(tokenizer_file)
    rng = random.Random(tokens)
    for _ in range(5):
        assert tok.count(tok.make(tokens, rng)) == tokens


def test_prompt_tokenizer_refuses_lengths_the_special_tokens_already_fill(tokenizer_file: Path) -> None:
    tok = PromptTokenizer(tokenizer_file)
    assert tok.added == 1  # the BOS token
    with pytest.raises(PerfError, match="special tokens"):
        tok.make(1, random.Random(0))


def test_synthetic_prompts_are_the_same_for_the_same_seed(tokenizer_file: Path) -> None:
    tok = PromptTokenizer(tokenizer_file)
    load = LlmLoad(prompt_tokens=Length(32, 8), output_tokens=Length(16, 4), seed=7, prompts=20)
    a, b = synthetic_prompts(load, tok), synthetic_prompts(load, tok)
    assert a == b
    other = synthetic_prompts(LlmLoad(prompt_tokens=Length(32, 8), seed=8, prompts=20), tok)
    assert [p.text for p in other] != [p.text for p in a]


def test_synthetic_prompts_follow_the_asked_distribution(tokenizer_file: Path) -> None:
    tok = PromptTokenizer(tokenizer_file)
    load = LlmLoad(prompt_tokens=Length(40, 10), output_tokens=Length(20, 5), seed=1, prompts=400)
    prompts = synthetic_prompts(load, tok)
    lengths = [p.tokens for p in prompts]
    assert all(tok.count(p.text) == p.tokens for p in prompts)  # every prompt exact
    assert statistics.mean(lengths) == pytest.approx(40, abs=1.5)
    assert statistics.pstdev(lengths) == pytest.approx(10, rel=0.15)
    outs = [p.output_tokens for p in prompts if p.output_tokens is not None]
    assert statistics.mean(outs) == pytest.approx(20, abs=1.0)
    assert statistics.pstdev(outs) == pytest.approx(5, rel=0.15)


def test_a_zero_stddev_gives_every_request_the_same_length(tokenizer_file: Path) -> None:
    prompts = synthetic_prompts(
        LlmLoad(prompt_tokens=Length(24), output_tokens=Length(8), prompts=30),
        PromptTokenizer(tokenizer_file),
    )
    assert {p.tokens for p in prompts} == {24} and {p.output_tokens for p in prompts} == {8}


def test_prompt_tokens_without_a_tokenizer_say_how_to_give_one() -> None:
    with pytest.raises(PerfError, match="--tokenizer"):
        synthetic_prompts(LlmLoad(prompt_tokens=Length(8)), None)


def test_find_tokenizer_finds_the_packed_hf_model_of_a_vllm_stage(tmp_path: Path) -> None:
    hf = tmp_path / "repo" / "tiny_llm" / "3" / "hf_model"
    hf.mkdir(parents=True)
    (hf / "tokenizer.json").write_text("{}")
    (tmp_path / "repo" / "tiny_llm" / "1").mkdir()
    assert find_tokenizer(str(tmp_path / "repo"), model="tiny_llm") == hf / "tokenizer.json"
    assert find_tokenizer(str(hf), model="other") == hf / "tokenizer.json"
    assert find_tokenizer(None, model="tiny_llm", repository=str(tmp_path / "repo")) == hf / "tokenizer.json"
    assert find_tokenizer(None, model="tiny_llm", repository=str(tmp_path / "none")) is None
    with pytest.raises(PerfError, match="no tokenizer.json"):
        find_tokenizer(str(tmp_path / "repo"), model="other")


def test_vllm_requests_ask_for_exactly_n_tokens_and_the_engines_counts() -> None:
    load = LlmLoad(output_tokens=Length(12), prompts=3)
    prompts = synthetic_prompts(load, None)
    reqs = build_requests(_vllm_signature(), prompts, stream=True)
    assert len(reqs) == 3
    params = json.loads(reqs[0]["sampling_parameters"].reshape(-1)[0])
    assert params == {"max_tokens": 12, "min_tokens": 12, "ignore_eos": True}
    assert bool(reqs[0]["stream"].reshape(-1)[0]) is True
    assert bool(reqs[0]["return_num_output_tokens"].reshape(-1)[0]) is True
    assert reqs[0]["text_input"].dtype == np.object_ and reqs[0]["text_input"].shape == (1,)


def test_output_tokens_on_a_model_without_a_length_control_is_refused() -> None:
    sig = ModelSignature(
        name="m", version="1", max_batch_size=0, inputs=(TensorInfo("TEXT_QUERY", "BYTES", (1,)),), outputs=()
    )
    prompts = synthetic_prompts(LlmLoad(output_tokens=Length(4), prompts=1), None)
    with pytest.raises(PerfError, match="max_tokens"):
        build_requests(sig, prompts, stream=True)
    plain = build_requests(sig, synthetic_prompts(LlmLoad(prompts=1), None), stream=True)
    assert plain[0]["TEXT_QUERY"].reshape(-1)[0] == b"Tell me a story."


def test_a_pipeline_gets_its_text_query_max_tokens_and_dataset_images(tmp_path: Path) -> None:
    sig = ModelSignature(
        name="vlm",
        version="1",
        max_batch_size=0,
        inputs=(
            TensorInfo("RAW_IMAGE", "UINT8", (-1,)),
            TensorInfo("TEXT_QUERY", "BYTES", (1,)),
            TensorInfo("MAX_TOKENS", "INT32", (1,), True),
        ),
        outputs=(),
    )
    (tmp_path / "cat.png").write_bytes(b"\x89PNG fake bytes")
    data = tmp_path / "prompts.jsonl"
    data.write_text(
        json.dumps({"prompt": "what is this?", "output_tokens": 5, "image": "cat.png"})
        + "\n\n"
        + json.dumps({"text_input": "and this?", "max_tokens": 7, "image": "cat.png"})
        + "\n"
    )
    prompts = read_dataset(data, LlmLoad(dataset=str(data)), None)
    reqs = build_requests(sig, prompts, stream=True)
    assert [int(r["MAX_TOKENS"].reshape(-1)[0]) for r in reqs] == [5, 7]
    assert bytes(reqs[0]["RAW_IMAGE"]) == b"\x89PNG fake bytes"
    assert prompt_counts(prompts) == ((-1, 5), (-1, 7))


def test_dataset_replay_keeps_file_order_and_fills_missing_lengths(
    tokenizer_file: Path, tmp_path: Path
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps({"prompt": f"prompt number {i}"}) for i in range(5)))
    tok = PromptTokenizer(tokenizer_file)
    prompts = read_dataset(data, LlmLoad(dataset=str(data), output_tokens=Length(9)), tok)
    assert [p.text for p in prompts] == [f"prompt number {i}" for i in range(5)]
    assert all(p.output_tokens == 9 and p.tokens == tok.count(p.text) for p in prompts)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("not json", "not a JSON"),
        ('{"x": 1}', "no 'prompt'"),
        ('{"prompt": "a", "output_tokens": 0}', "at least 1"),
    ],
)
def test_a_bad_dataset_line_is_named_by_file_and_line(tmp_path: Path, line: str, match: str) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(PerfError, match=match) as err:
        read_dataset(data, LlmLoad(dataset=str(data)), None)
    assert f"{data}:2" in str(err.value)


def test_dataset_and_prompt_tokens_together_are_refused() -> None:
    with pytest.raises(PerfError, match="not both"):
        LlmLoad(dataset="x.jsonl", prompt_tokens=Length(4)).validate()


def test_stream_summary_reports_achieved_lengths_and_misses() -> None:
    def rec(tokens: int, asked: int, prompt: int) -> tuple[int, int, int, int, int, int, int]:
        t = Timeline(
            send_ns=0,
            output_ns=tuple(1000 * (i + 1) for i in range(tokens)),
            tokens=(tokens,),
            input_tokens=prompt,
            asked_tokens=asked,
        )
        info = timeline_record(t)[3]
        assert info is not None
        return info

    infos = [rec(8, 8, 30), rec(8, 8, 34), rec(6, 8, 32)]
    summary = summarize_stream(infos, [1, 1, 1], duration_s=1.0, client_cpu_s=0.0)
    assert summary.output_length_misses == 1
    assert summary.output_length_error_avg == pytest.approx(-2 / 3)
    assert summary.input_tokens is not None and summary.input_tokens.avg_us == pytest.approx(32)
    assert summary.asked_output_tokens is not None and summary.asked_output_tokens.avg_us == 8
    again = type(summary).from_dict(summary.to_dict())
    assert again == summary


def test_a_streamed_llm_run_plots_its_achieved_lengths(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import dataclasses

    from tests.unit.test_perf_results import make_run, make_step
    from tritonkit.perf.plot import plot_run

    infos = [
        timeline_record(
            Timeline(
                send_ns=0, output_ns=(1000, 2000, 3000), tokens=(3,), input_tokens=20 + i, asked_tokens=3
            )
        )[3]
        for i in range(4)
    ]
    summary = summarize_stream(
        [i for i in infos if i is not None], [3000] * 4, duration_s=1.0, client_cpu_s=0.0
    )
    steps = tuple(dataclasses.replace(make_step(level, latency_ms=3), stream=summary) for level in (1, 2))
    out = tmp_path / "llm.png"
    plot_run(dataclasses.replace(make_run(), steps=steps), out)
    assert out.stat().st_size > 10_000


def test_prompts_are_exact_in_the_tiny_llms_own_tokenizer(tmp_path: Path) -> None:
    """The tokenizer of the project's tiny Llama (ensembles/llm/tiny_llm.py): byte-level BPE, a
    BOS added to every prompt, merges trained on a small corpus."""
    pytest.importorskip("tokenizers")
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "ensembles" / "llm" / "tiny_llm.py"
    spec = importlib.util.spec_from_file_location("tiny_llm_for_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._train_tokenizer(module.VOCAB_SIZE).save(str(tmp_path / "tokenizer.json"))
    tok = PromptTokenizer(tmp_path / "tokenizer.json")
    assert tok.added == 1
    prompts = synthetic_prompts(LlmLoad(prompt_tokens=Length(48, 16), seed=2, prompts=60), tok)
    assert all(tok.count(p.text) == p.tokens for p in prompts)


def test_a_report_of_an_engine_counted_run_says_the_engine_counted(tmp_path: Path) -> None:
    import dataclasses

    from tests.unit.test_perf_results import make_run, make_step
    from tritonkit.perf.report import render_markdown

    info = timeline_record(
        Timeline(send_ns=0, output_ns=(1000, 2000), tokens=(2,), input_tokens=9, asked_tokens=2)
    )[3]
    assert info is not None
    summary = summarize_stream([info], [2000], duration_s=1.0, client_cpu_s=0.0, token_counting="engine")
    run = dataclasses.replace(
        make_run(), steps=(dataclasses.replace(make_step(1, latency_ms=2), stream=summary),)
    )
    text = render_markdown(run, plot_file=None)
    assert "the engine's own counts" in text and "LLM load: tokens per request" in text
