"""Triton's tensor data type names and their numpy dtypes: the one table the package uses."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

#: Triton data type -> numpy scalar type (BYTES are numpy object arrays of bytes).
TRITON_TO_NUMPY: Mapping[str, Any] = MappingProxyType(
    {
        "BOOL": np.bool_,
        "UINT8": np.uint8,
        "UINT16": np.uint16,
        "UINT32": np.uint32,
        "UINT64": np.uint64,
        "INT8": np.int8,
        "INT16": np.int16,
        "INT32": np.int32,
        "INT64": np.int64,
        "FP16": np.float16,
        "FP32": np.float32,
        "FP64": np.float64,
        "BYTES": np.object_,
    }
)
