"""A corpus of small legal and broken models for the validator-vs-Triton verdict test.

Every entry writes one model directory (or a few) into a shared repository; ``LEGAL`` entries
must load on tritonserver 2.51, ``BROKEN`` ones must be refused. The cases come from what real
repositories hold (tutorials, QA models, notebooks): python models without a config, ensembles
mixing batching and non-batching models, reshapes, optional inputs, strings, sequence batching,
warm-up, version policies, hidden directories, execution environments, and Python models importing
packages a stock tritonserver image lacks (PIL, yaml, torch, cv2), as upstream examples do.

Those import cases are judged against the local server's own "image", the Python environment its
stub runs (declared to the validator as a pip freeze): PIL and yaml are there, so Triton loads
the models; torch and cv2 are not, so it refuses them. ``IMPORT_ONLY`` names the models refused
only for such an import: without a declared image the validator must warn about them, not refuse.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

Writer = Callable[[Path], None]

PY_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)]))
        return out
"""

PY_AUTOCOMPLETE = (
    PY_MODEL
    + """
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]})
        config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]})
        config.set_max_batch_size(8)
        return config
"""
)


def python_model(
    name: str,
    body: str = "",
    *,
    mbs: int = 8,
    dims: str = "[4]",
    dtype: str = "TYPE_FP32",
    versions: tuple[int, ...] = (1,),
    code: str = PY_MODEL,
    config: bool = True,
    in_extra: str = "",
    out_extra: str = "",
) -> Writer:
    """A python model echoing INPUT0 to OUTPUT0, plus ``body`` (more config text)."""

    def write(repo: Path) -> None:
        for v in versions:
            (repo / name / str(v)).mkdir(parents=True, exist_ok=True)
            (repo / name / str(v) / "model.py").write_text(code)
        if config:
            (repo / name / "config.pbtxt").write_text(
                f'name: "{name}"\nbackend: "python"\nmax_batch_size: {mbs}\n'
                f'input {{ name: "INPUT0" data_type: {dtype} dims: {dims} {in_extra}}}\n'
                f'output {{ name: "OUTPUT0" data_type: {dtype} dims: {dims} {out_extra}}}\n'
                "instance_group [{ kind: KIND_CPU count: 1 }]\n" + body
            )

    return write


def ensemble(
    name: str,
    steps: list[tuple[str, int | None, str, str, str, str]],
    *,
    mbs: int = 8,
    in_dims: str = "[4]",
    out_dims: str | None = None,
    extra_input: str = "",
) -> Writer:
    """An ensemble IN -> steps -> OUT; each step is (model, version, in key, in tensor, out key,
    out tensor); version None leaves model_version unset (0)."""

    def write(repo: Path) -> None:
        text = "".join(
            f'  step {{ model_name: "{m}" '
            + ("" if v is None else f"model_version: {v} ")
            + f'input_map {{ key: "{ik}" value: "{iv}" }} output_map {{ key: "{ok}" value: "{ov}" }} }}\n'
            for m, v, ik, iv, ok, ov in steps
        )
        (repo / name / "1").mkdir(parents=True, exist_ok=True)
        (repo / name / "config.pbtxt").write_text(
            f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {mbs}\n'
            f'input {{ name: "IN" data_type: TYPE_FP32 dims: {in_dims} {extra_input}}}\n'
            f'output {{ name: "OUT" data_type: TYPE_FP32 dims: {out_dims or in_dims} }}\n'
            f"ensemble_scheduling {{\n{text}}}\n"
        )

    return write


def via(member: str, *, version: int | None = -1) -> list[tuple[str, int | None, str, str, str, str]]:
    """onnx_m (batching, [4]) then ``member`` (INPUT0 -> OUTPUT0)."""
    return [("onnx_m", -1, "x", "IN", "y", "mid"), (member, version, "INPUT0", "mid", "OUTPUT0", "OUT")]


def all_of(*writers: Writer) -> Writer:
    def write(repo: Path) -> None:
        for w in writers:
            w(repo)

    return write


def files(paths: dict[str, str]) -> Writer:
    """Plain files, keyed by path relative to the repository."""

    def write(repo: Path) -> None:
        for rel, text in paths.items():
            target = repo / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    return write


def env_path(value: str) -> str:
    """Config text giving the Python backend an EXECUTION_ENV_PATH."""
    return f'parameters {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{value}" }} }}\n'


def hidden_model(name: str) -> Writer:
    def write(repo: Path) -> None:
        python_model("tmp_hidden_src")(repo)
        text = (repo / "tmp_hidden_src" / "config.pbtxt").read_text().replace("tmp_hidden_src", name)
        shutil.move(repo / "tmp_hidden_src", repo / name)
        (repo / name / "config.pbtxt").write_text(text)

    return write


SEQUENCE = """sequence_batching {
  max_sequence_idle_microseconds: 5000000
  control_input [
    { name: "START" control [{ kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] }] },
    { name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] }
  ]
}
"""
WARMUP = """model_warmup [{
  name: "zeros" batch_size: 2
  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [4] zero_data: true } }
}]
"""

# model name -> writer; each writer creates exactly the model named by its key (ensembles use
# the base fixture's onnx_m / py_m / ens and other corpus models as members).
LEGAL: dict[str, Writer] = {
    "py_noconf": python_model("py_noconf", config=False),
    "py_noconf_autocomplete": python_model("py_noconf_autocomplete", code=PY_AUTOCOMPLETE, config=False),
    ".hidden_complete": hidden_model(".hidden_complete"),
    "py_reshape": python_model(
        "py_reshape",
        mbs=8,
        dims="[4] reshape { shape: [2, 2] }",
    ),
    "py_optional": python_model(
        "py_optional", 'input { name: "EXTRA" data_type: TYPE_FP32 dims: [4] optional: true }\n'
    ),
    "py_strings": python_model("py_strings", dtype="TYPE_STRING", dims="[1]"),
    "py_sequence": python_model("py_sequence", SEQUENCE),
    "py_warmup": python_model("py_warmup", WARMUP),
    "py_versions_all": python_model("py_versions_all", "version_policy { all {} }\n", versions=(1, 2, 3)),
    "py_versions_specific": python_model(
        "py_versions_specific", "version_policy { specific { versions: [2] } }\n", versions=(1, 2, 3)
    ),
    "py_versions_latest2": python_model(
        "py_versions_latest2", "version_policy { latest { num_versions: 2 } }\n", versions=(1, 3, 10)
    ),
    "py_dynamic": python_model(
        "py_dynamic",
        "dynamic_batching { preferred_batch_size: [2, 8] max_queue_delay_microseconds: 100 "
        "priority_levels: 2 default_priority_level: 1 }\n",
    ),
    "py_wildcard": python_model("py_wildcard", dims="[-1]"),
    "py_nobatch": python_model("py_nobatch", mbs=0, dims="[-1, 4]"),
    "py_nobatch_fixed": python_model("py_nobatch_fixed", mbs=0, dims="[4]"),
    "py_labels": all_of(
        python_model("py_labels", out_extra='label_filename: "labels.txt" '),
        files({"py_labels/labels.txt": "a\nb\nc\nd\n"}),
    ),
    "py_ragged": python_model("py_ragged", dims="[-1]", in_extra="allow_ragged_batch: true "),
    "py_params": python_model(
        "py_params", 'parameters { key: "greeting" value: { string_value: "hello" } }\n'
    ),
    "py_name_omitted": files(
        {
            "py_name_omitted/config.pbtxt": 'backend: "python"\nmax_batch_size: 4\n'
            'input { name: "INPUT0" data_type: TYPE_FP32 dims: [4] }\n'
            'output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }\n',
            "py_name_omitted/1/model.py": PY_MODEL,
        }
    ),
    "onnx_noconf": lambda repo: shutil.copytree(repo / "onnx_m" / "1", repo / "onnx_noconf" / "1"),
    "py_env_activate": all_of(
        python_model(
            "py_env_activate",
            env_path("$$TRITON_MODEL_DIRECTORY/env"),
        ),
        files({"py_env_activate/env/bin/activate": "# an environment that changes nothing\n"}),
    ),
    "ens_nonbatching_full_shape": ensemble(
        "ens_nonbatching_full_shape", via("py_m"), mbs=0, in_dims="[-1, 4]"
    ),
    "ens_nonbatching_same_dims": ensemble("ens_nonbatching_same_dims", via("py_m"), mbs=0, in_dims="[4]"),
    "ens_nonbatching_fixed_batch": ensemble(
        "ens_nonbatching_fixed_batch", via("py_m"), mbs=0, in_dims="[2, 4]"
    ),
    "ens_over_nonbatching_member": ensemble("ens_over_nonbatching_member", via("py_nobatch")),
    "ens_over_nonbatching_same_dims": ensemble("ens_over_nonbatching_same_dims", via("py_nobatch_fixed")),
    "ens_smaller_batch": ensemble("ens_smaller_batch", via("py_m"), mbs=2),
    "ens_optional_unmapped": ensemble("ens_optional_unmapped", via("py_optional")),
    "ens_wildcard_member": ensemble("ens_wildcard_member", via("py_wildcard")),
    "ens_steps_reversed": ensemble("ens_steps_reversed", list(reversed(via("py_m")))),
    "ens_nested": ensemble("ens_nested", [("ens", -1, "IN", "IN", "OUT", "OUT")]),
    "ens_pinned_version": ensemble("ens_pinned_version", via("py_versions_all", version=2)),
    "py_imports_pil": python_model("py_imports_pil", code="from PIL import Image\n" + PY_MODEL),
    "py_imports_yaml": python_model("py_imports_yaml", code="import yaml\n" + PY_MODEL),
    "ens_over_pil_member": ensemble("ens_over_pil_member", via("py_imports_pil")),
    "ens_python_noconf_member": ensemble(
        "ens_python_noconf_member",
        [
            ("onnx_m", -1, "x", "IN", "y", "mid"),
            ("py_noconf_autocomplete", -1, "INPUT0", "mid", "OUTPUT0", "OUT"),
        ],
    ),
}

BROKEN: dict[str, Writer] = {
    ".ipynb_checkpoints": files({".ipynb_checkpoints/model-checkpoint.py": ""}),
    ".tritonkit-tmp-leftover": files({".tritonkit-tmp-leftover/py_m/config.pbtxt": 'name: "py_m"\n'}),
    "py_env_missing": python_model(
        "py_env_missing",
        env_path("$$TRITON_MODEL_DIRECTORY/env.tar.gz"),
    ),
    "py_env_directory": python_model(
        "py_env_directory",
        env_path("$$TRITON_MODEL_DIRECTORY/1"),
    ),
    "noconf_nofile": files({"noconf_nofile/1/weights.bin": "not a model"}),
    "py_versions_absent": python_model(
        "py_versions_absent", "version_policy { specific { versions: [5] } }\n"
    ),
    "py_labels_missing": python_model("py_labels_missing", out_extra='label_filename: "nope.txt" '),
    "py_bad_preferred": python_model("py_bad_preferred", "dynamic_batching { preferred_batch_size: [16] }\n"),
    "ens_nonbatching_mismatch": ensemble(
        "ens_nonbatching_mismatch", via("py_m"), mbs=0, in_dims="[3]", out_dims="[4]"
    ),
    "ens_member_too_small": ensemble("ens_member_too_small", via("py_versions_all"), mbs=16),
    "ens_version0_second": ensemble("ens_version0_second", via("py_m", version=None)),
    "ens_version_not_loaded": ensemble("ens_version_not_loaded", via("py_versions_specific", version=1)),
    "ens_version_absent": ensemble("ens_version_absent", via("py_m", version=7)),
    "ens_bad_member": ensemble("ens_bad_member", via("py_bad_preferred")),
    "ens_nested_bad": ensemble("ens_nested_bad", [("ens_bad_member", -1, "IN", "IN", "OUT", "OUT")]),
    "ens_reshape_input": ensemble(
        "ens_reshape_input", via("py_m"), in_dims="[4]", extra_input="reshape { shape: [2, 2] } "
    ),
    "ens_dtype_string_member": ensemble("ens_dtype_string_member", via("py_strings")),
    "ens_wrong_rank_member": ensemble("ens_wrong_rank_member", via("py_nobatch"), mbs=0, in_dims="[4]"),
    "ens_unknown_output": ensemble(
        "ens_unknown_output",
        [("onnx_m", -1, "x", "IN", "y", "mid"), ("py_m", -1, "INPUT0", "mid", "NOPE", "OUT")],
    ),
    "ens_member_noconf_nofile": ensemble("ens_member_noconf_nofile", via("noconf_nofile")),
    "py_imports_torch": python_model("py_imports_torch", code="import torch\n" + PY_MODEL),
    "py_imports_cv2": python_model("py_imports_cv2", code="import cv2\n" + PY_MODEL),
    "ens_over_torch_member": ensemble("ens_over_torch_member", via("py_imports_torch")),
}

#: Modules the BROKEN import cases need to be absent from the local server's environment.
ABSENT_MODULES = ("torch", "cv2")
#: Models Triton refuses here only because that environment lacks an import (and the ensemble
#: over one): with no serving image declared, the validator warns about them instead.
IMPORT_ONLY = frozenset({"py_imports_torch", "py_imports_cv2", "ens_over_torch_member"})


def model_table(log: str) -> dict[str, set[str]]:
    """Model -> the states of its rows in Triton's startup model table."""
    states: dict[str, set[str]] = {}
    for line in log.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 5 and cells[1] not in ("Model", "") and cells[2] != "Version":
            states.setdefault(cells[1], set()).add(cells[3].split(":")[0])
    return states


def ready_models(log: str) -> set[str]:
    """Models every row of which says READY in Triton's startup model table."""
    return {name for name, states in model_table(log).items() if states == {"READY"}}
