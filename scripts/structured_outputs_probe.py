"""Which structured-output grammar backend holds random tokens to a JSON schema, with no engine.

Run with the ``llm`` venv's Python (it has xgrammar, torch, transformers and jsonschema):

    .venv-llm/bin/python scripts/structured_outputs_probe.py ensembles/llm/tiny_llm_hf [--as-front-sends]

For every schema of tests/integration/test_openai_structured.py it samples answers from random
logits masked by the grammar (what a random-weight model does under vLLM's structured outputs),
with xgrammar (vLLM's ``auto`` choice for JSON schemas), and counts the answers that parse
(``json.loads``) and validate (``jsonschema``). ``--as-front-sends``: each schema as the OpenAI
front sends it (``json_safe_strings``). Prints one JSON line.
"""

from __future__ import annotations

import ast
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tritonkit.openai_front.requests import json_safe_strings  # noqa: E402

TESTS = Path(__file__).resolve().parents[1] / "tests" / "integration" / "test_openai_structured.py"
TRIALS = 5
MAX_TOKENS = 400


def schemas() -> dict[str, Any]:
    """SCHEMAS from the integration test, evaluated without importing pytest."""
    tree = ast.parse(TESTS.read_text(encoding="utf-8"))
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if (
                isinstance(target, ast.Name)
                and target.id in ("_S", "_ID", "SCHEMAS")
                and node.value is not None
            ):
                names[target.id] = eval(compile(ast.Expression(node.value), str(TESTS), "eval"), {}, names)  # noqa: S307
    return dict(names["SCHEMAS"])


def verdict(text: str, schema: Any) -> str:
    import jsonschema

    try:
        jsonschema.validate(json.loads(text), schema)
    except ValueError:
        return "unparsable"
    except jsonschema.ValidationError:
        return "invalid"
    return "valid"


def run(model_dir: str, *, as_front_sends: bool) -> dict[str, Any]:
    import torch
    import xgrammar
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    eos = tokenizer.eos_token_id
    info = xgrammar.TokenizerInfo.from_huggingface(tokenizer)
    compiler = xgrammar.GrammarCompiler(info)
    torch.manual_seed(0)
    counts = {"valid": 0, "invalid": 0, "unparsable": 0, "unfinished": 0}
    examples: list[str] = []
    for name, schema in schemas().items():
        sent = json_safe_strings(schema) if as_front_sends else schema
        compiled = compiler.compile_json_schema(json.dumps(sent))
        for _ in range(TRIALS):
            matcher = xgrammar.GrammarMatcher(compiled)
            mask = xgrammar.allocate_token_bitmask(1, info.vocab_size)
            ids: list[int] = []
            while not matcher.is_terminated() and len(ids) < MAX_TOKENS:
                matcher.fill_next_token_bitmask(mask)
                logits = torch.randn(1, info.vocab_size)
                xgrammar.apply_token_bitmask_inplace(logits, mask)
                token = int(torch.multinomial(torch.softmax(logits, -1), 1))
                if not matcher.accept_token(token):
                    raise RuntimeError(f"{name}: xgrammar refused token {token} its own mask allowed")
                ids.append(token)
            if not matcher.is_terminated():
                counts["unfinished"] += 1
                continue
            text = tokenizer.decode([i for i in ids if i != eos])
            result = verdict(text, schema)
            counts[result] += 1
            if result != "valid" and len(examples) < 3:
                examples.append(f"{name}: {text!r}")
    return {
        "backend": "xgrammar",
        "schemas": "as the front sends them" if as_front_sends else "as written",
        "trials_per_schema": TRIALS,
        "max_tokens": MAX_TOKENS,
        "counts": counts,
        "examples": examples,
    }


def main() -> None:
    began = time.monotonic()
    result = run(sys.argv[1], as_front_sends="--as-front-sends" in sys.argv[2:])
    result["seconds"] = round(time.monotonic() - began, 1)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
