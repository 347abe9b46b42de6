"""Backend kinds: everything that follows from "this model runs on backend X", one module per kind.

:mod:`.base` is the protocol, :mod:`.registry` finds the kind of a spec model, a config or an
entry; :mod:`.onnx`, :mod:`.python`, :mod:`.ensemble`, :mod:`.vllm` and :mod:`.tensorrtllm` are the
kinds. The facts every kind shares live once: :mod:`.names` (the LLM engines' backend names),
:mod:`.entry` (``ModelEntry``, the spec's line helpers), :mod:`.paths` (the serving root and the
served-path rule), :mod:`.walk` (which models of a repository a backend serves),
:mod:`.releases` (the release catalog) and :mod:`.rules` (what the kinds' checks and the
validator's rules are told and report). The kinds import :mod:`tritonkit.config`,
:mod:`tritonkit.errors` and each other, nothing above them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.kinds.base import BackendKind, BuildFacts, DeployFacts, ServeFacts, SpecContext
    from tritonkit.kinds.entry import ModelEntry, ModelKind
    from tritonkit.kinds.paths import DEFAULT_SERVING_ROOT, check_serving_root, local_path, served_path
    from tritonkit.kinds.registry import (
        all_kinds,
        kind_for,
        kind_for_config,
        kind_for_spec,
        kind_named,
        kind_of_entry,
    )
    from tritonkit.kinds.walk import config_files_of, models_of

# The names imported above load on first use (PEP 562): a leaf such as :mod:`.names`, which the
# client imports, must not pull in the registry and with it the spec, the builder and the validator.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "DEFAULT_SERVING_ROOT",
    "BackendKind",
    "BuildFacts",
    "DeployFacts",
    "ModelEntry",
    "ModelKind",
    "ServeFacts",
    "SpecContext",
    "all_kinds",
    "check_serving_root",
    "config_files_of",
    "kind_for",
    "kind_for_config",
    "kind_for_spec",
    "kind_named",
    "kind_of_entry",
    "local_path",
    "models_of",
    "served_path",
]
