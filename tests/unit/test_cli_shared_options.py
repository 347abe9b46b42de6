"""`perf` and `tune` take the load the same way: a flag both verbs have means one thing (declared
once, in tritonkit/cli/_options.py or _auth_options.py) unless its meaning differs by verb."""

from __future__ import annotations

from typing import Any

import typer.main

from tritonkit.cli.app import app

#: flags perf and tune share by name only, each with its verb's meaning
MEANING_DIFFERS = {
    "--concurrency": "perf sweeps levels; tune takes the production load",
    "--request-rate": "the same split as --concurrency",
    "--latency-budget": "perf prices the best step within it (and streams' goodput); tune's constraint",
    "--prompt-tokens": "an optional LLM load in perf; an engine stage's load in tune (default 64)",
    "--output-tokens": "the same split as --prompt-tokens (default 32 in tune)",
    "--tokenizer": "perf counts streamed tokens; tune defaults to the stage's packed hf_model/",
    "--repository": "perf finds BLS callees; tune validates candidates and writes variants",
    "--seed": "perf's prompt draws; tune's sampler",
}


def _flags(verb: str) -> dict[str, Any]:
    command = typer.main.get_command(app).commands[verb]  # type: ignore[attr-defined]
    return {flag: p for p in command.params for flag in p.opts if flag.startswith("--")}


def test_perf_and_tune_declare_each_shared_load_option_once() -> None:
    perf, tune = _flags("perf"), _flags("tune")
    shared = sorted(set(perf) & set(tune) - set(MEANING_DIFFERS))
    assert {"--workers", "--warmup", "--stability-percentage", "--max-trials", "--input-data"} <= set(shared)
    differ = [
        flag
        for flag in shared
        if (perf[flag].help, perf[flag].opts, perf[flag].secondary_opts)
        != (tune[flag].help, tune[flag].opts, tune[flag].secondary_opts)
    ]
    assert differ == []
    assert set(MEANING_DIFFERS) <= set(perf) & set(tune)
