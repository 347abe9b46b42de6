"""The package's shape, held where issues #30 and #43 left it (figures from scripts/arch_metrics.py)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "arch_metrics.py"


def _metrics() -> ModuleType:
    spec = importlib.util.spec_from_file_location("arch_metrics", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["arch_metrics"] = module
    spec.loader.exec_module(module)
    return module


METRICS: Any = _metrics()
FIGURES: dict[str, list[str]] = METRICS.figures()


def test_package_has_no_import_circles_counting_parent_packages_lazy_and_type_checking_imports() -> None:
    assert FIGURES["import_circles"] == []


def test_circles_count_a_parent_packages_init_as_python_runs_it() -> None:
    """The circle of issue #43 (a kind imports the validator's report; importing it runs
    repository/__init__, whose builder imports the kinds' registry) goes only through packages'
    __init__ files: the graph must see it."""
    graph = {
        "tritonkit.kinds.vllm": {"tritonkit.repository.validator.report"},
        "tritonkit.repository.validator.report": set(),
        "tritonkit.repository": {"tritonkit.repository.builder"},
        "tritonkit.repository.builder": {"tritonkit.kinds.registry"},
        "tritonkit.kinds.registry": {"tritonkit.kinds.vllm"},
    }
    with_parents = {m: set(ds) for m, ds in graph.items()}
    with_parents["tritonkit.kinds.vllm"] |= {"tritonkit.repository", "tritonkit.repository.validator"}
    assert METRICS.cycles(graph) == []
    assert METRICS.cycles(with_parents) == [
        [
            "tritonkit.kinds.registry",
            "tritonkit.kinds.vllm",
            "tritonkit.repository",
            "tritonkit.repository.builder",
        ]
    ]


def test_imports_between_packages_follow_the_edge_table() -> None:
    assert FIGURES["edges_outside_table"] == []


def test_the_edge_table_refuses_an_edge_it_does_not_list() -> None:
    graph = {"tritonkit.kinds.vllm.checks": {"tritonkit.repository.validator.layout", "tritonkit.config"}}
    assert METRICS.edges_outside_table(graph) == [
        "tritonkit.kinds.vllm.checks -> tritonkit.repository.validator.layout"
    ]


def test_docs_show_the_edge_table_the_test_holds() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    shown = re.search(r"<!-- edge-table -->\n```\n(.*?)\n```", text, re.S)
    assert shown is not None, "docs/architecture.md lost its edge table block"
    assert shown.group(1) == METRICS.edge_table()


def test_package_inits_import_nothing_of_another_package_when_they_run() -> None:
    """A package's __init__ runs whenever any of its modules is imported: its public names load on
    first use (tritonkit._lazy), so importing one module costs only that module's own floor."""
    eager = []
    for mod, path in METRICS.modules().items():
        if path.name != "__init__.py" or METRICS.inside(path):
            continue
        for node in ast.parse(path.read_text()).body:  # module level; TYPE_CHECKING blocks are ifs
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tritonkit"):
                target = node.module
                own = target == mod or target.startswith(mod + ".")
                if not own and METRICS.unit(target) not in METRICS.LEAVES:
                    eager.append(f"{mod} -> {target}")
    assert eager == []


def test_every_module_imports_alone_in_a_fresh_interpreter() -> None:
    """Each module in a child of an interpreter that holds no tritonkit module (issue #43: the
    kinds' modules failed with a circular import unless something else loaded the registry first).
    Code that runs inside Triton is left out (it needs triton_python_backend_utils)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--import-each"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=True,
    )
    results = json.loads(done.stdout)
    assert sorted(results) == sorted(METRICS.importable())
    assert "tritonkit.kinds.vllm.checks" in results
    assert {m: e for m, e in results.items() if e is not None} == {}


def test_no_module_outside_triton_side_code_is_over_600_lines() -> None:
    assert FIGURES["modules_over_600_lines"] == []


def test_no_function_is_over_120_lines() -> None:
    assert FIGURES["functions_over_120_lines"] == []


def test_backend_names_stand_in_at_most_four_modules() -> None:
    assert len(FIGURES["modules_naming_backend_strings"]) <= 4, FIGURES["modules_naming_backend_strings"]


def test_no_package_imports_another_packages_private_module() -> None:
    assert FIGURES["private_imports_across_packages"] == []


def test_every_public_exception_derives_from_tritonkit_error() -> None:
    assert FIGURES["exceptions_outside_tree"] == []
