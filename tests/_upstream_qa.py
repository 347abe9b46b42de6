"""Triton's QA model-config cases (server ``qa/L0_model_config``), laid out as its test.sh runs them.

Shared by the unit test (the validator's verdicts) and the integration test (tritonserver 2.51's).
Each case directory of ``tests/fixtures/upstream/server/qa_model_config`` holds one model (its
``config.pbtxt`` and the QA's ``expected*`` error texts); ``verdicts.json`` (``qa_model_config``)
records Triton's verdict, the validator rule that names the same defect, and 2.51's own message.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

UPSTREAM = Path(__file__).resolve().parent / "fixtures" / "upstream"
QA = UPSTREAM / "server" / "qa_model_config"
CASES: list[dict[str, Any]] = json.loads((UPSTREAM / "verdicts.json").read_text())["qa_model_config"]
#: the platform test.sh writes into noautofill_platform configs; the one of its TRIALS served here
PLATFORM = "onnxruntime_onnx"


def group(case: str) -> str:
    """The QA directory a case sits in, which decides how test.sh runs it."""
    return case.split("/", 1)[0]


def auto_complete(case: str) -> bool:
    """test.sh runs noautofill_platform with --strict-model-config=true and the invalid_platform
    special case with --disable-auto-complete-config; everything else with auto-complete on."""
    return group(case) != "noautofill_platform" and case != "special_cases/invalid_platform"


def model_name(case: str) -> str:
    return case.rsplit("/", 1)[1]


def place(row: dict[str, Any], repository: Path) -> Path:
    """Copy one case into ``repository`` as test.sh would: no expected files, a version directory
    (holding the case's model.py), and for noautofill_platform the platform line replaced (its
    ``sed`` + ``echo``)."""
    case = row["case"]
    model = repository / model_name(case)
    shutil.copytree(QA / case, model, ignore=shutil.ignore_patterns("expected*"))
    (model / "1").mkdir(exist_ok=True)
    if "model_py" in row:
        (model / "1" / "model.py").write_text(render_model_py(row["model_py"]))
    elif "model_py_from" in row:
        source = UPSTREAM / row["model_py_from"]
        shutil.copyfile(source if source.is_file() else source / "1" / "model.py", model / "1" / "model.py")
    if group(case) == "noautofill_platform":
        config = model / "config.pbtxt"
        kept = [
            line
            for line in config.read_text().splitlines()
            if not line.strip().startswith(("platform:", "backend:"))
        ]
        config.write_text("\n".join([*kept, f'platform: "{PLATFORM}"', ""]))
    return model


def render_model_py(spec: dict[str, Any]) -> str:
    """A QA Python model re-made from its ``auto_complete_config`` calls (``verdicts.json``): the
    upstream calls with the same literal values in the same order, and an ``execute`` that does
    nothing, as upstream's does."""
    call = "        auto_complete_model_config."
    lines = [
        "# Re-made from the case's upstream model.py (tests/fixtures/upstream/README.md).",
        "class TritonPythonModel:",
        "    @staticmethod",
        "    def auto_complete_config(auto_complete_model_config):",
        f"{call}set_max_batch_size({spec['max_batch_size']})",
    ]
    if "transaction_policy" in spec:
        lines.append(f"{call}set_model_transaction_policy({spec['transaction_policy']!r})")
    if spec.get("dynamic_batching"):
        lines.append(f"{call}set_dynamic_batching()")
    lines += [f"{call}add_input({io!r})" for io in spec["inputs"]]
    lines += [f"{call}add_output({io!r})" for io in spec["outputs"]]
    if spec.get("returns", True):
        lines.append("        return auto_complete_model_config")
    return "\n".join([*lines, "", "    def execute(self, requests):", "        pass", ""])


def grep_pattern(expected: str) -> str:
    """The QA's ``expected`` text (a grep basic regex) as a Python regex."""
    text = expected.strip()
    return re.sub(r"[()|+?{}]", lambda m: "\\" + m.group(0), text)
