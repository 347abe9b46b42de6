"""A Grafana dashboard for one Triton deployment, importable into Azure Managed Grafana.

The datasource is a template variable (``${datasource}``, declared in ``__inputs`` and
``templating``): a fixed datasource uid would not exist in the Grafana it is imported into.
Counters go through ``rate()`` over ``$__rate_interval``; DCGM's GPU series are gauges.
"""

from __future__ import annotations

from typing import Any

from tritonkit.deploy.aks import trtllm as aks_trtllm
from tritonkit.deploy.aks import vllm as aks_vllm
from tritonkit.deploy.aks.options import AksOptions

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _panel(pid: int, title: str, unit: str, targets: list[tuple[str, str]], x: int, y: int) -> dict[str, Any]:
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def _vllm_panels(o: AksOptions, sel: str, win: str) -> list[dict[str, Any]]:
    """vLLM's own series (NVIDIA's backend, REPORT_CUSTOM_METRICS): engine queue, KV cache,
    tokens/s, time to first token. Gauges as they are, counters and histogram buckets in rate()."""
    if o.vllm is None or not o.vllm.metrics:
        return []
    m = f'{sel},model=~"{aks_vllm.model_regex(o.vllm.metrics)}"'
    return [
        _panel(
            7,
            "vLLM engine: requests running and waiting",
            "short",
            [
                (f"sum by (model) (vllm:num_requests_running{{{m}}})", "{{model}} running"),
                (f"sum by (model) (vllm:num_requests_waiting{{{m}}})", "{{model}} waiting"),
            ],
            0,
            24,
        ),
        _panel(
            8,
            "vLLM KV cache usage (fullest engine)",
            "percentunit",
            [(f"max by (model) (vllm:gpu_cache_usage_perc{{{m}}})", "{{model}}")],
            12,
            24,
        ),
        _panel(
            9,
            "vLLM generated tokens per second",
            "short",
            [(f"sum by (model) (rate(vllm:generation_tokens_total{{{m}}}[{win}]))", "{{model}}")],
            0,
            32,
        ),
        _panel(
            10,
            "vLLM time to first token (p95)",
            "s",
            [
                (
                    "histogram_quantile(0.95, sum by (model, le) "
                    f"(rate(vllm:time_to_first_token_seconds_bucket{{{m}}}[{win}])))",
                    "{{model}}",
                )
            ],
            12,
            32,
        ),
    ]


def _trtllm_panels(o: AksOptions, sel: str) -> list[dict[str, Any]]:
    """The TensorRT-LLM backend's own gauges (nv_trt_llm_*: see aks_trtllm.py)."""
    if o.trtllm is None:
        return []
    req = aks_trtllm.REQUEST_METRIC
    return [
        _panel(
            11,
            "TensorRT-LLM engine: requests active and waiting",
            "short",
            [
                (f'sum by (model) ({req}{{{sel},request_type="active"}})', "{{model}} active"),
                (f'sum by (model) ({req}{{{sel},request_type="waiting"}})', "{{model}} waiting"),
            ],
            0,
            40,
        ),
        _panel(
            12,
            "TensorRT-LLM KV cache used (fullest engine)",
            "percentunit",
            [(aks_trtllm.kv_cache_expr(sel), "fullest engine")],
            12,
            40,
        ),
    ]


def _front_panels(o: AksOptions, sel: str, win: str) -> list[dict[str, Any]]:
    """The OpenAI front's tokens (``tritonkit_openai_tokens_total``: the models' own counts, by
    model, kind and API key id, never a key's text) and requests per key: what a platform bills by."""
    if o.openai_port is None:
        return []
    tokens = f"tritonkit_openai_tokens_total{{{sel}}}"
    requests = f"tritonkit_openai_requests_total{{{sel}}}"
    return [
        _panel(
            13,
            "OpenAI front: tokens per second by model",
            "short",
            [(f"sum by (model, kind) (rate({tokens}[{win}]))", "{{model}} {{kind}}")],
            0,
            48,
        ),
        _panel(
            14,
            "OpenAI front: tokens per second by API key",
            "short",
            [(f"sum by (key, kind) (rate({tokens}[{win}]))", "{{key}} {{kind}}")],
            12,
            48,
        ),
        _panel(
            15,
            "OpenAI front: requests per second by API key and status",
            "reqps",
            [(f"sum by (key, status) (rate({requests}[{win}]))", "{{key}} {{status}}")],
            0,
            56,
        ),
        _panel(
            16,
            "OpenAI front: tokens by API key over the dashboard's range",
            "short",
            [(f"sum by (key, model) (increase({tokens}[$__range]))", "{{key}} {{model}}")],
            12,
            56,
        ),
    ]


def _triton_panels(o: AksOptions, sel: str, win: str) -> list[dict[str, Any]]:
    """Triton's own counters per model (queue, compute, throughput, batch size) and the GPUs' DCGM gauges."""

    def per_request(counter: str) -> str:
        return (
            f"sum by (model) (rate({counter}{{{sel}}}[{win}]))"
            f" / clamp_min(sum by (model) (rate(nv_inference_request_success{{{sel}}}[{win}])), 1e-9)"
        )

    compute = " + ".join(
        f"sum by (model) (rate(nv_inference_compute_{part}_duration_us{{{sel}}}[{win}]))"
        for part in ("input", "infer", "output")
    )
    gpu = f'namespace="{o.namespace}",pod=~"{o.name}-.*"'
    return [
        _panel(
            1,
            "Queue time per request",
            "µs",
            [(per_request("nv_inference_queue_duration_us"), "{{model}}")],
            0,
            0,
        ),
        _panel(
            2,
            "Compute time per request (input + infer + output)",
            "µs",
            [
                (
                    f"({compute}) / clamp_min(sum by (model) "
                    f"(rate(nv_inference_request_success{{{sel}}}[{win}])), 1e-9)",
                    "{{model}}",
                )
            ],
            12,
            0,
        ),
        _panel(
            3,
            "Requests per second",
            "reqps",
            [
                (f"sum by (model) (rate(nv_inference_request_success{{{sel}}}[{win}]))", "{{model}} ok"),
                (f"sum by (model) (rate(nv_inference_request_failure{{{sel}}}[{win}]))", "{{model}} failed"),
            ],
            0,
            8,
        ),
        _panel(
            4,
            "Average batch size (inferences per execution)",
            "short",
            [
                (
                    f"sum by (model) (rate(nv_inference_count{{{sel}}}[{win}]))"
                    f" / clamp_min(sum by (model) (rate(nv_inference_exec_count{{{sel}}}[{win}])), 1e-9)",
                    "{{model}}",
                )
            ],
            12,
            8,
        ),
        _panel(
            5,
            "GPU utilisation",
            "percent",
            [(f"avg by (pod, gpu) (DCGM_FI_DEV_GPU_UTIL{{{gpu}}})", "{{pod}} gpu {{gpu}}")],
            0,
            16,
        ),
        _panel(
            6,
            "GPU memory used",
            "mbytes",  # MiB (IEC), as DCGM reports the framebuffer
            [(f"sum by (pod, gpu) (DCGM_FI_DEV_FB_USED{{{gpu}}})", "{{pod}} gpu {{gpu}}")],
            12,
            16,
        ),
    ]


def dashboard(o: AksOptions) -> dict[str, Any]:
    sel = o.series_selector()
    win = "$__rate_interval"
    panels = [
        *_triton_panels(o, sel, win),
        *_vllm_panels(o, sel, win),
        *_trtllm_panels(o, sel),
        *_front_panels(o, sel, win),
    ]
    return {
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "description": "Azure Monitor workspace (managed Prometheus) or any Prometheus",
                "type": "datasource",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
            }
        ],
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
            {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
        ],
        "title": f"Triton {o.namespace}/{o.name}",
        "uid": None,
        "tags": ["triton", "tritonkit"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                    "refresh": 1,
                    "options": [],
                }
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }
