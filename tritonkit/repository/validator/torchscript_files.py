"""The PyTorch backend's TorchScript naming and shape rules that need no model file."""

from __future__ import annotations

from tritonkit.config import ModelConfig, data_type_name
from tritonkit.repository.validator.findings import Finding
from tritonkit.repository.validator.findings import config_shape as _config_shape
from tritonkit.repository.validator.findings import shape_text as _shape

__all__ = ["torchscript_findings"]


def _named_index(name: str) -> int | None:
    """The index of a ``<name>__<index>`` tensor name as the PyTorch backend parses it, else None."""
    pos = name.find("__")
    if pos < 0:
        return None
    rest = name[pos + 2 :]
    if not rest.isdigit() and rest != "":
        return None
    return int(rest) if rest else 0


def torchscript_findings(cfg: ModelConfig) -> list[Finding]:
    """The PyTorch backend's load-time naming/shape rules that need no model file."""
    out: list[Finding] = []
    for i, ci in enumerate(cfg.sequence_batching.control_input if cfg.HasField("sequence_batching") else ()):
        if _named_index(ci.name) is None:
            out.append(
                Finding(
                    severity="error",
                    code="torchscript-naming",
                    message=f"sequence control '{ci.name}' must follow the <name>__<index> convention "
                    "(e.g. START__2) for the PyTorch backend",
                    at=f"sequence_batching.control_input[{i}].name",
                )
            )
    batching = cfg.max_batch_size > 0
    for kind, tensors in (("input", cfg.input), ("output", cfg.output)):
        if not tensors:
            # the PyTorch backend does not auto-complete: TorchScript keeps no I/O metadata
            out.append(
                Finding(
                    severity="error",
                    code="torchscript-io-missing",
                    message=f"the config declares no {kind}; the PyTorch backend cannot auto-complete them "
                    f"and refuses a model without at least one {kind}",
                    at=None,
                )
            )
        for i, t in enumerate(tensors):
            dims, field = _config_shape(t)
            if data_type_name(t.data_type) == "BYTES" and len(dims) + (1 if batching else 0) > 1:
                out.append(
                    Finding(
                        severity="error",
                        code="torchscript-string-dims",
                        message=f"{kind} '{t.name}': the PyTorch backend only supports a 1-dimensional "
                        f"list of strings, but {field} {_shape(dims)}"
                        + (" plus the batch dimension" if batching else "")
                        + " has more",
                        at=f"{kind}[{i}].{field}",
                    )
                )
        indexed = [_named_index(t.name) for t in tensors]
        if not tensors or all(ix is None for ix in indexed):
            continue
        who = "forward()'s arguments" if kind == "input" else "the tensors forward() returns"
        if any(ix is None for ix in indexed):
            plain = [t.name for t, ix in zip(tensors, indexed, strict=True) if ix is None]
            out.append(
                Finding(
                    severity="warning",
                    code="torchscript-naming",
                    message=f"some {kind}s follow the <name>__<index> convention and {', '.join(plain)} "
                    f"do{'es' if len(plain) == 1 else ''} not, so Triton maps {kind}s to {who} by their "
                    "order in this config"
                    + (" (unless every name is a forward() argument name)" if kind == "input" else ""),
                    at=f"{kind}[{indexed.index(None)}].name",
                )
            )
        elif sorted(ix for ix in indexed if ix is not None) != list(range(len(tensors))):
            out.append(
                Finding(
                    severity="warning",
                    code="torchscript-naming",
                    message=f"{kind} names index {who} as {sorted(ix for ix in indexed if ix is not None)}, "
                    f"but {len(tensors)} {kind}(s) need the indices 0..{len(tensors) - 1} exactly once",
                    at=f"{kind}[0].name",
                )
            )
    return out
