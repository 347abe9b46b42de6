"""The demo's LLM-decoder pipelines (``vlm_llm``, ``arr_coc_llm``: vision stages -> prompt -> LLM
stage) built over a stand-in for the vLLM stage that answers by the clock
(``benchmarks/clock_tiny_llm.yaml``: the stage's whole tensor contract, any number of answers at
once), for the tests that compose them (client, OpenAI front, ``tritonkit perf``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "ensembles" / "assets" / "sample.png"
QUESTIONS = {"vlm_llm": "Describe the image.", "arr_coc_llm": "Where is the sun?"}
GAP_MS = 40  # one piece every 40 ms: an answer of 128 pieces takes ~5 s


def set_parameters(config: Path, **parameters: Any) -> None:
    """Set (or add) string parameters of a built model's config.pbtxt."""
    text = config.read_text()
    for key, value in parameters.items():
        text, found = re.subn(
            rf'(key: "{key}"\s*value \{{\s*string_value: )"[^"]*"', rf'\g<1>"{value}"', text
        )
        if not found:
            text += f'parameters {{\n  key: "{key}"\n  value {{\n    string_value: "{value}"\n  }}\n}}\n'
    config.write_text(text)


def build_composed_repository(where: Path) -> tuple[Path, Path]:
    """The pipelines' repository under ``where``, its clock stage one piece every ``GAP_MS``;
    returns it and the file where the stage logs each request Triton cancelled."""
    from tritonkit.repository import build_spec

    repository = where / "model_repository"
    for spec in ("ensembles/vlm.yaml", "ensembles/arr_coc.yaml", "benchmarks/clock_tiny_llm.yaml",
                 "ensembles/vlm_llm.yaml", "ensembles/arr_coc_llm.yaml"):  # fmt: skip
        build_spec(ROOT / spec, repository, force=True)
    cancelled = where / "cancelled.log"
    set_parameters(repository / "tiny_llm" / "config.pbtxt", GAP_MS=GAP_MS, CANCELLED_LOG=cancelled)
    return repository, cancelled


def run_cli(argv: list[str]) -> int:
    """``tritonkit ARGV`` in this process; its exit status."""
    from tritonkit.cli.app import main

    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
