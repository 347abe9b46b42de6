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
    """test.sh runs noautofill_platform and special_cases with --strict-model-config=true."""
    return group(case) not in ("noautofill_platform", "special_cases")


def model_name(case: str) -> str:
    return case.rsplit("/", 1)[1]


def place(case: str, repository: Path) -> Path:
    """Copy one case into ``repository`` as test.sh would: no expected files, a version directory,
    and for noautofill_platform the platform line replaced (its ``sed`` + ``echo``)."""
    model = repository / model_name(case)
    shutil.copytree(QA / case, model, ignore=shutil.ignore_patterns("expected*"))
    (model / "1").mkdir(exist_ok=True)
    if group(case) == "noautofill_platform":
        config = model / "config.pbtxt"
        kept = [
            line
            for line in config.read_text().splitlines()
            if not line.strip().startswith(("platform:", "backend:"))
        ]
        config.write_text("\n".join([*kept, f'platform: "{PLATFORM}"', ""]))
    return model


def grep_pattern(expected: str) -> str:
    """The QA's ``expected`` text (a grep basic regex) as a Python regex."""
    text = expected.strip()
    return re.sub(r"[()|+?{}]", lambda m: "\\" + m.group(0), text)
