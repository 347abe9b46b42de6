"""A batching-bound stand-in for the tune race: each execute() pays a fixed cost per batch.

Like an accelerator kernel launch or a weight pass, the cost of a batch barely grows with its
size (BATCH_MS fixed, ITEM_MS per request), so throughput depends on how full the batches are:
instances, max_batch_size, dynamic batching and the load all matter. The fixed cost is a sleep
(not CPU work), so the 2 shared CPU cores of the benchmark box blur it less than a real model.
"""

import time

import numpy as np
import triton_python_backend_utils as pb_utils

BATCH_MS = 20.0
ITEM_MS = 0.2


class TritonPythonModel:
    def execute(self, requests):
        arrays = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        items = sum(a.shape[0] for a in arrays)
        time.sleep((BATCH_MS + ITEM_MS * items) / 1000.0)
        out = []
        for a in arrays:
            y = np.tanh(a.astype(np.float32))
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", y)]))
        return out
