"""The GPU benchmark's torch stage: a small ResNet-like classifier made in code (no weights).

FP16 on a ``KIND_GPU`` instance, FP32 on a CPU one (the benchmark's dry run). Its width comes
from the config parameter ``width``; the input's size from the config. The first forward passes
run in ``initialize`` (a torch stage's first batches are far slower than the steady state).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


def _network(torch: Any, width: int, classes: int) -> Any:
    nn = torch.nn

    class Block(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, channels_in: int, channels: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False),
                nn.BatchNorm2d(channels),
                nn.ReLU(),
                nn.Conv2d(channels, channels, 3, 1, 1, bias=False),
                nn.BatchNorm2d(channels),
            )
            self.skip = (
                nn.Identity()
                if stride == 1 and channels_in == channels
                else nn.Sequential(
                    nn.Conv2d(channels_in, channels, 1, stride, bias=False), nn.BatchNorm2d(channels)
                )
            )

        def forward(self, x: Any) -> Any:
            return torch.relu(self.body(x) + self.skip(x))

    layers = [
        nn.Conv2d(3, width, 7, 2, 3, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
    ]
    channels = width
    for stage, out in enumerate((width, width * 2, width * 4, width * 8)):
        for i in range(2):
            layers.append(Block(channels, out, 2 if stage and not i else 1))
            channels = out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes)]
    return nn.Sequential(*layers)


class TritonPythonModel:
    def initialize(self, args: dict[str, Any]) -> None:
        import torch  # inside initialize: the build's import check runs without torch

        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        gpu = args.get("model_instance_kind") == "GPU"
        self.torch = torch
        self.device = torch.device(f"cuda:{args.get('model_instance_device_id', '0')}" if gpu else "cpu")
        self.dtype = torch.float16 if gpu else torch.float32
        if not gpu:
            torch.set_num_threads(int(params.get("threads") or 1))
        torch.manual_seed(0)
        out_dims = config["output"][0]["dims"]
        net = _network(torch, int(params.get("width") or 64), int(out_dims[-1]))
        self.net = net.eval().to(self.device, self.dtype)
        dims = [int(d) for d in config["input"][0]["dims"]]
        warm = torch.zeros([1, *dims], device=self.device, dtype=self.dtype)
        with torch.inference_mode():
            for _ in range(3):
                self.net(warm)
        pb_utils.Logger.log_info(f"resnet stage on {self.device} ({self.dtype})")

    def execute(self, requests: list[Any]) -> list[Any]:
        torch = self.torch
        arrays = [pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy() for r in requests]
        x = torch.from_numpy(np.concatenate(arrays)).to(self.device, self.dtype)
        with torch.inference_mode():
            y = self.net(x).float().cpu().numpy()
        responses, start = [], 0
        for array in arrays:
            part = y[start : start + array.shape[0]]
            start += array.shape[0]
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", np.ascontiguousarray(part))])
            )
        return responses
