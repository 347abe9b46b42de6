"""Per-stage tables and the stacked plot of where a pipeline's time goes."""

from __future__ import annotations

from pathlib import Path

from tritonkit.perf.results import PerfRun, StepResult
from tritonkit.perf.stage_results import StageStats

__all__ = ["STAGE_COLUMNS", "per_pipeline_request", "plot_stages", "stage_rows"]

STAGE_COLUMNS = (
    "level",
    "stage",
    "via",
    "version",
    "requests",
    "queue",
    "input",
    "infer",
    "output",
    "per pipeline req",
    "batch",
)


def per_pipeline_request(step: StepResult, stage: StageStats) -> float:
    """The stage's time (queue + compute, us) per request of the pipeline itself: a stage run
    twice per pipeline request counts twice; a stage on one branch of two runs in parallel with
    the other (the sum of all stages may exceed the pipeline's latency)."""
    pipeline = step.server.success_count if step.server is not None else 0
    if pipeline <= 0:
        return stage.time_us
    return stage.time_us * stage.requests / pipeline


def stage_rows(run: PerfRun) -> list[list[str]]:
    """One row per stage per step; times in ms per stage request."""
    rows: list[list[str]] = []
    for step in run.steps:
        for st in step.stages:
            rows.append(
                [
                    step.level_label,
                    st.model,
                    st.via if st.via != "named" else "--composing",
                    st.version or "-",
                    str(st.requests),
                    f"{st.queue_us / 1000:.2f}",
                    f"{st.compute_input_us / 1000:.2f}",
                    f"{st.compute_infer_us / 1000:.2f}",
                    f"{st.compute_output_us / 1000:.2f}",
                    f"{per_pipeline_request(step, st) / 1000:.2f}",
                    f"{st.batch_size:.2f}",
                ]
            )
    return rows


def plot_stages(run: PerfRun, path: Path, *, title: str | None = None) -> None:
    """Stacked bars per step: each working stage's queue and compute time per pipeline request,
    beside the pipeline's own server-side time and the client's average latency."""
    from tritonkit.perf.plot import pyplot, save_figure
    from tritonkit.perf.stages import leaf_stages

    plt = pyplot()
    models: list[str] = []
    for step in run.steps:
        for st in leaf_stages(step.stages):
            if st.model not in models:
                models.append(st.model)
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(run.steps) + 3), 4.8))
    xs = list(range(len(run.steps)))
    bottoms = [0.0] * len(run.steps)
    for k, model in enumerate(models):
        queue, compute = [], []
        for step in run.steps:
            found = next((s for s in step.stages if s.model == model), None)
            if found is None or not found.time_us:
                queue.append(0.0)
                compute.append(0.0)
                continue
            share = per_pipeline_request(step, found) / found.time_us
            queue.append(found.queue_us * share / 1000)
            compute.append((found.time_us - found.queue_us) * share / 1000)
        color = cmap(k % 10)
        ax.bar(xs, compute, bottom=bottoms, color=color, width=0.6, label=f"{model} compute")
        bottoms = [b + c for b, c in zip(bottoms, compute, strict=True)]
        ax.bar(
            xs, queue, bottom=bottoms, color=color, alpha=0.35, hatch="//", width=0.6, label=f"{model} queue"
        )
        bottoms = [b + q for b, q in zip(bottoms, queue, strict=True)]
    server = [s.server.request_us / 1000 if s.server else float("nan") for s in run.steps]
    client = [s.latency.avg_us / 1000 if s.latency else float("nan") for s in run.steps]
    ax.plot(xs, server, marker="o", color="black", label="pipeline, server side")
    ax.plot(xs, client, marker="^", linestyle="--", color="grey", label="client avg latency")
    ax.set_xticks(xs, [s.level_label for s in run.steps])
    ax.set_xlabel("concurrency" if run.mode == "concurrency" else "request rate")
    ax.set_ylabel("ms per pipeline request")
    ax.set_title(title or f"{run.model}: where the time goes (stages in parallel branches overlap)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure(fig, path)
