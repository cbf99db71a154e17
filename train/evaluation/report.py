"""What a training run shows a reviewer: reward curves as a PNG (matplotlib, Agg) and a markdown summary."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from train.evaluation.diagnose import diagnose_steps, step_endings


def _value(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _finite(xs: list[Any], ys: list[float]) -> tuple[list[Any], list[float]]:
    """The points with a value: a series with none is not drawn (and gets no legend entry)."""
    kept = [(x, y) for x, y in zip(xs, ys) if not math.isnan(y)]
    return [x for x, _ in kept], [y for _, y in kept]


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` through a partial file and a rename (a reader never sees half a PNG)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial.png")
    fig.savefig(partial, dpi=100)
    partial.replace(path)
    return path


def draw_diagnosis(fig: Any, lines: list[str]) -> None:
    """The diagnosis under the axes, in words, so the picture says why it is flat."""
    if lines:
        fig.text(0.01, 0.01, "\n".join(f"- {line}" for line in lines), fontsize=8, va="bottom", ha="left",
                 color="#a00000", wrap=True)


def reward_figure(steps: list[dict[str, Any]], title: str, diagnosis: list[str]) -> Any:
    """Reward mean (with a +-std band) and outcome rate per step over the rollouts each filter dropped, on integer
    step ticks; only series with values are drawn; ``diagnosis`` is written beneath."""
    import matplotlib

    matplotlib.use("Agg")  # no display on workers and CI
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    x = [s["step"] for s in steps]
    height = 6 + 0.18 * len(diagnosis)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, height), sharex=True)
    fig.subplots_adjust(bottom=(0.55 + 0.16 * len(diagnosis)) / height, top=0.94, hspace=0.12)
    mean = [_value(s["reward_mean"]) for s in steps]
    band = [(xi, m, _value(s["reward_std"])) for xi, m, s in zip(x, mean, steps)]
    band = [(xi, m, sd) for xi, m, sd in band if not (math.isnan(m) or math.isnan(sd))]
    if band:
        top.fill_between([b[0] for b in band], [b[1] - b[2] for b in band], [b[1] + b[2] for b in band], alpha=0.2,
                         label="reward +- std")
    drawn: list[float] = [b[1] + b[2] for b in band] + [b[1] - b[2] for b in band]
    for values, marker, label in ((mean, "o", "reward mean (kept rollouts)"),
                                  ([_value(s["outcome_rate"]) for s in steps], "s", "outcome (solved) rate")):
        xs, ys = _finite(x, values)
        if xs:
            top.plot(xs, ys, marker=marker, label=label)
            drawn += ys
    top.set_ylim(min([-0.05, *drawn]), max([1.05, *drawn]))  # rates live in [0, 1]: a flat 0 is seen as one
    if not band:
        top.text(0.5, 0.7, "no rollout kept a reward: no reward curve", transform=top.transAxes, ha="center",
                 va="center", fontsize=9, color="#555555")
    top.set_ylabel("reward / rate")
    if top.get_legend_handles_labels()[0]:
        top.legend(loc="upper left", fontsize=8)
    top.set_title(title, fontsize=9)
    xs, ys = _finite(x, [_value(s.get("rollouts")) for s in steps])
    if xs:
        bottom.bar(xs, ys, width=0.8, color="#dddddd", edgecolor="#999999", label="rollouts scored")
    stacked = [0] * len(steps)
    for key, label, colour in (("drop_format_error", "format error", "#c44e52"),
                               ("drop_no_final_output", "no final answer", "#dd8452"),
                               ("drop_low_std_group", "low-std group", "#8172b3")):
        counts = [int(s[key] or 0) for s in steps]
        if any(counts):  # a filter that dropped nothing gets no legend entry
            bottom.bar(x, counts, width=0.5, bottom=stacked, color=colour, label=f"dropped: {label}")
            stacked = [a + b for a, b in zip(stacked, counts)]
    bottom.set_ylabel("rollouts")
    bottom.set_xlabel("optimizer step")
    heights = [*ys, *stacked]
    bottom.set_ylim(0, max(heights) * 1.35 if heights and max(heights) > 0 else 1)  # room for the legend
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    if x:
        bottom.set_xlim(min(x) - 0.6, max(x) + 0.6)
    if bottom.get_legend_handles_labels()[0]:
        bottom.legend(loc="best", fontsize=8)
    draw_diagnosis(fig, diagnosis)
    return fig


def plot_reward_curves(steps: list[dict[str, Any]], path: str | Path, title: str,
                       diagnosis: list[str] | None = None) -> Path:
    """``reward_figure`` written to ``path``; ``diagnosis`` defaults to ``diagnose_steps(steps)``."""
    import matplotlib.pyplot as plt

    fig = reward_figure(steps, title, diagnose_steps(steps) if diagnosis is None else diagnosis)
    try:
        return save_figure(fig, path)
    finally:
        plt.close(fig)


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _splits(run: dict[str, Any]) -> str:
    splits = json.loads(run.get("config_json") or "{}").get("splits") or {}
    if not splits:
        return "not recorded"
    return (f"`{splits.get('split')}` split trained on ({splits.get('train')} tasks; the instances come from it), "
            f"`test` split held out for evaluation ({splits.get('test')} tasks); {splits.get('rule')} split")


def run_markdown(run: dict[str, Any], steps: list[dict[str, Any]], diagnosis: list[str] | None = None) -> str:
    """The Prefect artifact's text for a ``training_runs`` row and its ``training_steps`` (``diagnosis``: what
    went wrong, from ``diagnose_steps``)."""
    lines = [
        f"# Training run `{run['run_id']}`",
        "",
        f"- **status:** {run['status']}; **steps:** {run['global_step']} / {run['max_steps']}"
        + (f"; resumed {run['resumes']} time(s), last from `{run['resumed_from']}`" if run["resumes"] else ""),
        f"- **snapshot:** `{run['snapshot_id']}`; **profile:** `{run['profile']}`; **config** `{run['config_hash']}`",
        f"- **instances:** {run['instances']}; "
        f"**preference run:** `{run['preference_run_id'] or 'none (accuracy-first)'}`; "
        f"**pricing seed:** {run['pricing_seed']} (training schedules only)",
        f"- **splits:** {_splits(run)}",
        f"- **final checkpoint:** `{run['final_checkpoint']}`",
        f"- **reward curves:** `{run['reward_curve_png']}`",
        "",
        "| step | rollouts | ended by | reward mean | reward std | outcome rate | cost | completion tokens "
        "| dropped fmt / no-final / low-std | loss | seconds |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for s in steps:
        ended = ", ".join(f"{e} {n}" for e, n in step_endings(s).most_common()) or "-"
        lines.append(f"| {s['step']} | {_fmt(s.get('rollouts'))} | {ended} | {_fmt(s['reward_mean'])} "
                     f"| {_fmt(s['reward_std'])} | {_fmt(s['outcome_rate'])} "
                     f"| {_fmt(s['cost_mean'], 5)} | {_fmt(s['completion_tokens'], 0)} "
                     f"| {s['drop_format_error']} / {s['drop_no_final_output']} / {s['drop_low_std_group']} "
                     f"| {_fmt(s['loss'], 4)} | {_fmt(s['seconds'], 1)} |")
    if diagnosis:
        lines += ["", "## Why nothing learned", "", *[f"- {line}" for line in diagnosis]]
    return "\n".join(lines) + "\n"


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a success rate (95% with the default ``z``); (0, 1) when nothing was tried.

    >>> [round(x, 3) for x in wilson_interval(0, 10)]
    [0.0, 0.278]
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def stages_figure(points: list[dict[str, Any]], title: str, diagnosis: list[str]) -> Any:
    """One plot over the stages (x: base, then each stage's final model): held-out success with its 95% interval,
    training reward, held-out format-error rate; series without values are not drawn; ``diagnosis`` beneath."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = 4.5 + 0.18 * len(diagnosis)
    fig, ax = plt.subplots(figsize=(7, height))
    fig.subplots_adjust(bottom=(0.6 + 0.16 * len(diagnosis)) / height, top=0.9)
    x = list(range(len(points)))
    held = [(i, p) for i, p in zip(x, points) if p["success"] is not None]
    if held:
        ax.errorbar([i for i, _ in held], [p["success"] for _, p in held],
                    yerr=[[p["success"] - p["interval"][0] for _, p in held],
                          [p["interval"][1] - p["success"] for _, p in held]],
                    marker="o", capsize=4, label="held-out success (95% Wilson interval)")
    else:
        ax.text(0.5, 0.6, "no evaluate stage: no held-out figures", transform=ax.transAxes, ha="center",
                fontsize=9, color="#555555")
    for key, marker, label in (("reward", "s", "training reward (GRPO mean; RFT: share verified)"),
                               ("format_rate", "x", "held-out episodes with a format error"),
                               ("train_format_rate", "v", "GRPO rollouts with a format error")):
        xs, ys = _finite(x, [_value(p[key]) for p in points])
        if xs:
            ax.plot(xs, ys, marker=marker, linestyle="--", label=label)
    ax.set_xticks(x, [p["label"] for p in points])
    ax.set_xlim(-0.5, len(points) - 0.5)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("rate")
    ax.set_xlabel("model after stage")
    ax.set_title(title, fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize=8)
    draw_diagnosis(fig, diagnosis)
    return fig


def plot_stages(points: list[dict[str, Any]], path: str | Path, title: str, diagnosis: list[str]) -> Path:
    import matplotlib.pyplot as plt

    fig = stages_figure(points, title, diagnosis)
    try:
        return save_figure(fig, path)
    finally:
        plt.close(fig)


def stages_markdown(run_id: str, stages: list[dict[str, Any]], points: list[dict[str, Any]], png: str,
                    diagnosis: list[str]) -> str:
    """The artifact of a staged run: each stage's run and model, the figures per model, the plot, the diagnosis."""
    lines = [f"# Staged training run `{run_id}`", "", f"- **plot:** `{png}`", "",
             "| stage | run | from | final model | steps | this attempt | seconds |", "|---|---|---|---|---:|---:|---:|"]
    for s in stages:
        attempt = f"{s['steps_this_attempt']} steps" if s["ran"] else "finished earlier"
        lines.append(f"| {s['stage']} | `{s['run_id']}` | `{s['start_model']}` | `{s['final_model']}` "
                     f"| {_fmt(s['steps'])} | {attempt} | {_fmt(s['seconds'], 1)} |")
    lines += ["", "| model after | held-out success | 95% interval | format-error rate | training reward |",
              "|---|---:|---|---:|---:|"]
    for p in points:
        interval = "-" if p["interval"] is None else f"{p['interval'][0]:.3f}-{p['interval'][1]:.3f}"
        lines.append(f"| {p['label']} | {_fmt(p['success'])} | {interval} | {_fmt(p['format_rate'])} "
                     f"| {_fmt(p['reward'])} |")
    if diagnosis:
        lines += ["", "## What went wrong", "", *[f"- {line}" for line in diagnosis]]
    return "\n".join(lines) + "\n"
