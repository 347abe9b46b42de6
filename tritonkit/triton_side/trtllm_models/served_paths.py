"""The served-path rule of the TensorRT-LLM layout's Python models, shipped beside each model.py
that reads a directory from its parameters (the build copies it there; the Python backend puts
the version directory on ``sys.path``).

tritonkit's rule (``tritonkit.kinds.paths.local_path``), copied because this file runs inside
Triton; a unit test holds the two to the same table.
"""

import os


def served_dir(value, model_dir, version):
    """``value`` where it exists, else ``<...>/<model>/<version>/<rest>`` mapped onto this
    model's own directory (the repository mounted somewhere other than the build assumed)."""
    if os.path.isabs(value) and os.path.isdir(value):
        return value
    if not os.path.isabs(value):
        return os.path.join(model_dir, str(version), value)
    parts = value.strip("/").split("/")
    name = os.path.basename(os.path.normpath(model_dir))
    for i in range(len(parts) - 1):
        if parts[i] == name and parts[i + 1].isdigit():
            return os.path.join(model_dir, *parts[i + 1 :])
    return value
