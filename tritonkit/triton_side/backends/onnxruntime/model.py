"""A Python-based Triton backend named ``onnxruntime``: runs ONNX models with onnxruntime on CPU.

Triton loads ``<backend-directory>/onnxruntime/model.py`` for every model whose config says
``platform: "onnxruntime_onnx"`` or ``backend: "onnxruntime"`` when no native
``libtriton_onnxruntime.so`` is there, so production configs load unchanged on a CPU-only box.

What it honours from the model config:
- ``default_model_filename`` (else ``model.onnx``) inside the version directory;
- inputs/outputs by name, their data types (cast to what the ONNX graph expects and back) and
  ``reshape``; BYTES tensors;
- batching: requests the dynamic batcher hands over together are concatenated along the batch
  dimension, run once, and split back per request;
- auto-complete: a config without inputs or outputs gets them from the ONNX graph (names, data
  types, dims; the batch dimension dropped when ``max_batch_size`` > 0), as Triton's native
  onnxruntime backend does;
- parameters ``intra_op_thread_count``, ``inter_op_thread_count`` (as Triton's own onnxruntime
  backend names them) and ``allow_spinning`` (default off: spinning threads starve a small box);
- ``KIND_GPU`` and ``optimization.execution_accelerators`` as Triton's onnxruntime backend reads
  them (TensorRT with its ``precision_mode``, workspace, ``trt_*`` and engine-cache parameters,
  then CUDA; ``openvino`` for CPU instances), when the installed onnxruntime has those providers
  (``onnxruntime-gpu``). A config that asks for more than the CPU gets one log line per instance
  group at load (marker ``[tritonkit onnxruntime]``) saying which provider runs and why, and every
  instance sets the gauge ``tritonkit_onnx_execution_provider{model,instance,provider,requested}``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

_ORT_TO_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
    "tensor(string)": np.object_,
}


# onnx TensorProto.DataType -> Triton data type
_ONNX_TO_TRITON = {
    1: "TYPE_FP32", 2: "TYPE_UINT8", 3: "TYPE_INT8", 4: "TYPE_UINT16", 5: "TYPE_INT16",
    6: "TYPE_INT32", 7: "TYPE_INT64", 8: "TYPE_STRING", 9: "TYPE_BOOL", 10: "TYPE_FP16",
    11: "TYPE_FP64", 12: "TYPE_UINT32", 13: "TYPE_UINT64", 16: "TYPE_BF16",
}


_CPU = "CPUExecutionProvider"
#: Triton's TensorRT parameters that onnxruntime names otherwise (the rest pass as they are)
_TRT_RENAMED = {
    "max_workspace_size_bytes": "trt_max_workspace_size",
    "int8_calibration_table_name": "trt_int8_calibration_table_name",
    "int8_use_native_calibration_table": "trt_int8_use_native_calibration_table",
}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def plan_providers(
    config: dict[str, Any], *, model: str, kind: str, device_id: int, cache_root: Path
) -> tuple[list[tuple[str, dict[str, str]]], str]:
    """The providers (with options) the config asks for, best first, and that request in words.

    As Triton's onnxruntime backend: a GPU instance runs TensorRT when the config names the
    ``tensorrt`` accelerator, with CUDA behind it (and first without it); CPU instances run
    ``openvino`` when named. The CPU provider always comes last.
    """
    accelerators = (config.get("optimization") or {}).get("execution_accelerators") or {}
    wanted: list[tuple[str, dict[str, str]]] = []
    words = [f"KIND_{kind}"]
    if kind == "GPU":
        cuda: dict[str, str] = {"device_id": str(device_id)}
        for accelerator in accelerators.get("gpu_execution_accelerator") or []:
            name, params = accelerator.get("name", ""), dict(accelerator.get("parameters") or {})
            if name == "tensorrt":
                options = {"device_id": str(device_id)}
                precision = params.pop("precision_mode", "FP32").upper()
                if precision in ("FP16", "INT8"):
                    options[f"trt_{precision.lower()}_enable"] = "True"
                options.update({_TRT_RENAMED.get(k, k): v for k, v in params.items()})
                cached = _truthy(options.get("trt_engine_cache_enable"))
                if cached:
                    options.setdefault("trt_engine_cache_path", str(cache_root / model))
                wanted.append(("TensorrtExecutionProvider", options))
                words.append(f"TensorRT {precision}" + (" (engine cache)" if cached else ""))
            elif name == "cuda":
                cuda.update(params)
                words.append("CUDA")
            else:
                words.append(f"accelerator '{name}' (not a GPU one this backend knows: ignored)")
        wanted.append(("CUDAExecutionProvider", cuda))
    else:
        for accelerator in accelerators.get("cpu_execution_accelerator") or []:
            if accelerator.get("name") == "openvino":
                wanted.append(("OpenVINOExecutionProvider", {}))
                words.append("OpenVINO")
        if accelerators.get("gpu_execution_accelerator"):
            words.append("GPU accelerators (ignored for CPU instances)")
    wanted.append((_CPU, {}))
    return wanted, " + ".join(words)


def provider_note(
    model: str, asked: str, wanted: list[str], running: list[str], available: list[str], version: str
) -> str | None:
    """One line saying which provider runs and why; None for a plain CPU model on the CPU."""
    if wanted == [_CPU] and "ignored" not in asked:
        return None
    first = running[0] if running else _CPU
    head = f"{model}: config asks {asked}"
    missing = [name for name in wanted if name not in available and name != _CPU]
    if missing:
        gpu = any("CUDA" in m or "Tensorrt" in m for m in missing)
        fix = " (pip install 'tritonkit[gpu]': onnxruntime-gpu)" if gpu else ""
        return f"{head}; onnxruntime {version} here has only {', '.join(available)}: running on {first}{fix}"
    failed = [name for name in wanted if name not in running and name in available]
    if failed:
        return f"{head}; onnxruntime could not start {', '.join(failed)} (see above): running on {first}"
    then = f" (then {', '.join(running[1:])})" if running[1:] else ""
    return f"{head}; running on {first}{then}"


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonkit" / "trt_engines"


def _stub_model_path() -> Path | None:
    """The model file the Python backend stub was started for (its first argument).

    ``auto_complete_config`` receives only the config, not the model's location; the stub's
    command line carries ``<model dir>/<version>/<default_model_filename>``.
    """
    try:
        argv = Path("/proc/self/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if len(argv) < 2:
        return None
    path = Path(argv[1].decode(errors="replace"))
    return path if path.suffix == ".onnx" and path.is_file() else None


def _graph_tensors(path: Path, batched: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    initializers = {init.name for init in graph.initializer}

    def spec(value: Any) -> dict[str, Any] | None:
        tensor_type = value.type.tensor_type
        data_type = _ONNX_TO_TRITON.get(tensor_type.elem_type)
        if data_type is None:
            return None
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim]
        if batched:
            dims = dims[1:]
        return {"name": value.name, "data_type": data_type, "dims": dims or [1]}

    inputs = [spec(v) for v in graph.input if v.name not in initializers]
    outputs = [spec(v) for v in graph.output]
    return [s for s in inputs if s is not None], [s for s in outputs if s is not None]


def _parameter(config: dict[str, Any], key: str) -> str | None:
    value = config.get("parameters", {}).get(key)
    if isinstance(value, dict):
        value = value.get("string_value")
    return None if value in (None, "") else str(value)


def _int_parameter(config: dict[str, Any], key: str, default: int) -> int:
    raw = _parameter(config, key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise pb_utils.TritonModelException(
            f"parameter '{key}' must be an integer, got '{raw}'"
        ) from None


def _instance_count(config: dict[str, Any]) -> int:
    groups = config.get("instance_group") or [{"count": 1}]
    return max(1, sum(int(g.get("count", 1)) for g in groups))


def _config_dtype(data_type: str) -> Any:
    if data_type == "TYPE_STRING":
        return np.object_
    return pb_utils.triton_string_to_numpy(data_type)


class _Tensor:
    """One config input or output: name, numpy dtype, dims and the reshape, if any."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.name: str = spec["name"]
        self.dtype = _config_dtype(spec["data_type"])
        self.dims = [int(d) for d in spec.get("dims", [])]
        self.optional = bool(spec.get("optional", False))
        reshape = spec.get("reshape")
        self.reshape = [int(d) for d in reshape.get("shape", [])] if reshape is not None else None


def _reshaped(array: np.ndarray, shape: list[int], batched: bool) -> np.ndarray:
    target = ([array.shape[0]] if batched else []) + shape
    if sum(1 for d in target if d < 0) > 1:
        return array  # ambiguous; leave the shape as the graph produced it
    return array.reshape(target)


class TritonPythonModel:
    """The onnxruntime backend, one instance per Triton model instance."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config: Any) -> Any:
        config = auto_complete_model_config.as_dict()
        if config.get("input") and config.get("output"):
            return auto_complete_model_config
        path = _stub_model_path()
        if path is None:
            return auto_complete_model_config  # initialize() reports the missing file
        try:
            inputs, outputs = _graph_tensors(path, int(config.get("max_batch_size", 0)) > 0)
        except Exception:  # noqa: BLE001 - an unreadable file is reported by initialize()
            return auto_complete_model_config
        if not config.get("input"):
            for spec in inputs:
                auto_complete_model_config.add_input(spec)
        if not config.get("output"):
            for spec in outputs:
                auto_complete_model_config.add_output(spec)
        return auto_complete_model_config

    def initialize(self, args: dict[str, Any]) -> None:
        import onnxruntime as ort

        self.config: dict[str, Any] = json.loads(args["model_config"])
        self.model_name: str = args["model_name"]
        self.batched = int(self.config.get("max_batch_size", 0)) > 0
        filename = self.config.get("default_model_filename") or ""
        if not filename or filename.endswith(".py"):
            filename = "model.onnx"
        path = Path(args["model_repository"]) / args["model_version"] / filename
        if not path.is_file():
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': ONNX file not found: {path}"
            )

        options = ort.SessionOptions()
        cores = os.cpu_count() or 1
        default_threads = max(1, min(4, cores // _instance_count(self.config)))
        options.intra_op_num_threads = _int_parameter(self.config, "intra_op_thread_count", default_threads)
        options.inter_op_num_threads = _int_parameter(self.config, "inter_op_thread_count", 1)
        spinning = (_parameter(self.config, "allow_spinning") or "0").lower() in ("1", "true", "yes")
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spinning else "0")
        kind = str(args.get("model_instance_kind", "CPU")).upper()
        wanted, asked = plan_providers(
            self.config, model=self.model_name, kind="GPU" if kind == "GPU" else "CPU",
            device_id=int(args.get("model_instance_device_id") or 0), cache_root=_cache_root(),
        )
        available = list(ort.get_available_providers())
        chosen = [(name, opts) for name, opts in wanted if name in available or name == _CPU]
        try:
            self.session = ort.InferenceSession(str(path), sess_options=options, providers=chosen)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': onnxruntime could not load {path}: {exc}"
            ) from exc
        self._report_providers(args, [n for n, _ in wanted], available, asked, ort.__version__)

        self.inputs = [_Tensor(spec) for spec in self.config.get("input", [])]
        self.outputs = [_Tensor(spec) for spec in self.config.get("output", [])]
        graph_inputs = {i.name: i for i in self.session.get_inputs()}
        graph_outputs = {o.name for o in self.session.get_outputs()}
        self.graph_dtypes = {
            name: _ORT_TO_NUMPY.get(node.type, np.float32) for name, node in graph_inputs.items()
        }
        for tensor in self.inputs:
            if tensor.name not in graph_inputs:
                raise pb_utils.TritonModelException(
                    f"model '{self.model_name}': config input '{tensor.name}' is not an input of "
                    f"{path.name} (graph inputs: {', '.join(sorted(graph_inputs))})"
                )
        for tensor in self.outputs:
            if tensor.name not in graph_outputs:
                raise pb_utils.TritonModelException(
                    f"model '{self.model_name}': config output '{tensor.name}' is not an output of "
                    f"{path.name} (graph outputs: {', '.join(sorted(graph_outputs))})"
                )
        self.output_by_name = {t.name: t for t in self.outputs}

    def _report_providers(
        self, args: dict[str, Any], wanted: list[str], available: list[str], asked: str, version: str
    ) -> None:
        """The provider line (first instance of each group) and the provider gauge (every instance)."""
        running = list(self.session.get_providers())
        instance = str(args.get("model_instance_name", ""))
        note = provider_note(self.model_name, asked, wanted, running, available, version)
        if note is not None and instance.endswith("_0"):
            pb_utils.Logger.log_info(f"[tritonkit onnxruntime] {note}")
        try:
            family = pb_utils.MetricFamily
            self._provider_family = family(
                "tritonkit_onnx_execution_provider", "Execution provider running this instance", family.GAUGE
            )
            labels = {"model": self.model_name, "instance": instance,
                      "provider": running[0] if running else _CPU, "requested": wanted[0]}
            self._provider_metric = self._provider_family.Metric(labels=labels)
            self._provider_metric.set(1.0)
        except Exception:  # noqa: BLE001 - metrics are optional (--allow-metrics=false)
            self._provider_metric = None

    # -- inference ------------------------------------------------------------------------

    def execute(self, requests: list[Any]) -> list[Any]:
        try:
            feeds = [self._read_inputs(r) for r in requests]
        except pb_utils.TritonModelException:
            return [self._run_each(request) for request in requests]
        if self.batched and len(requests) > 1 and self._stackable(feeds):
            try:
                return self._run_together(requests, feeds)
            except Exception as exc:  # noqa: BLE001 - one run per request reports per request
                pb_utils.Logger.log_warn(
                    f"model '{self.model_name}': batched run failed ({exc}); running requests one by one"
                )
        return [self._run_one(request, feed) for request, feed in zip(requests, feeds, strict=True)]

    def _run_each(self, request: Any) -> Any:
        try:
            return self._run_one(request, self._read_inputs(request))
        except pb_utils.TritonModelException as exc:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc)))

    def _read_inputs(self, request: Any) -> dict[str, np.ndarray]:
        feed: dict[str, np.ndarray] = {}
        for tensor in self.inputs:
            triton_tensor = pb_utils.get_input_tensor_by_name(request, tensor.name)
            if triton_tensor is None and tensor.optional:
                continue
            if triton_tensor is None:
                raise pb_utils.TritonModelException(
                    f"model '{self.model_name}': request lacks input '{tensor.name}'"
                )
            feed[tensor.name] = triton_tensor.as_numpy()
        return feed

    def _stackable(self, feeds: list[dict[str, np.ndarray]]) -> bool:
        first = feeds[0]
        if any(feed.keys() != first.keys() for feed in feeds):
            return False
        return all(
            feed[name].shape[1:] == first[name].shape[1:] and feed[name].dtype == first[name].dtype
            for feed in feeds[1:]
            for name in first
        )

    def _to_graph(self, tensor: _Tensor, array: np.ndarray) -> np.ndarray:
        if tensor.reshape is not None:
            array = _reshaped(array, tensor.reshape, self.batched)
        want = self.graph_dtypes[tensor.name]
        if want is np.object_:
            if array.dtype == np.object_:
                flat = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in array.flat]
                return np.array(flat, dtype=np.object_).reshape(array.shape)
            return array.astype(np.str_).astype(np.object_)
        if array.dtype != want:
            array = array.astype(want)
        return array

    def _from_graph(self, tensor: _Tensor, array: np.ndarray) -> np.ndarray:
        if tensor.reshape is not None:
            array = _reshaped(array, tensor.dims, self.batched)
        if tensor.dtype is np.object_:
            flat = [v.encode("utf-8") if isinstance(v, str) else v for v in np.asarray(array).flat]
            return np.array(flat, dtype=np.object_).reshape(np.shape(array))
        return np.ascontiguousarray(array, dtype=tensor.dtype)

    def _wanted_outputs(self, request: Any) -> list[_Tensor]:
        names = request.requested_output_names()
        if not names:
            return self.outputs
        return [self.output_by_name[n] for n in names if n in self.output_by_name]

    def _run(self, feed: dict[str, np.ndarray], outputs: list[_Tensor]) -> dict[str, np.ndarray]:
        graph_feed = {}
        for tensor in self.inputs:
            if tensor.name not in feed:
                continue
            try:
                graph_feed[tensor.name] = self._to_graph(tensor, feed[tensor.name])
            except (ValueError, TypeError) as exc:
                raise pb_utils.TritonModelException(
                    f"model '{self.model_name}': input '{tensor.name}' with shape "
                    f"{list(feed[tensor.name].shape)} does not fit the model: {exc}"
                ) from exc
        try:
            values = self.session.run([t.name for t in outputs], graph_feed)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': onnxruntime failed: {exc}"
            ) from exc
        try:
            return {t.name: self._from_graph(t, v) for t, v in zip(outputs, values, strict=True)}
        except (ValueError, TypeError) as exc:
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}': an output does not match its config (dims, data type): {exc}"
            ) from exc

    def _response(self, results: dict[str, np.ndarray]) -> Any:
        return pb_utils.InferenceResponse(
            output_tensors=[pb_utils.Tensor(name, value) for name, value in results.items()]
        )

    def _run_one(self, request: Any, feed: dict[str, np.ndarray]) -> Any:
        try:
            return self._response(self._run(feed, self._wanted_outputs(request)))
        except pb_utils.TritonModelException as exc:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc)))

    def _run_together(self, requests: list[Any], feeds: list[dict[str, np.ndarray]]) -> list[Any]:
        sizes = [next(iter(feed.values())).shape[0] if feed else 0 for feed in feeds]
        stacked = {name: np.concatenate([feed[name] for feed in feeds]) for name in feeds[0]}
        results = self._run(stacked, self.outputs)
        responses = []
        start = 0
        for request, size in zip(requests, sizes, strict=True):
            wanted = self._wanted_outputs(request)
            part = {t.name: results[t.name][start : start + size] for t in wanted}
            responses.append(self._response(part))
            start += size
        return responses

    def finalize(self) -> None:
        self.session = None
