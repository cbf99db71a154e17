"""What a training run shows a reviewer: reward curves as a PNG (matplotlib, Agg) and a markdown summary."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def _value(v: Any) -> float:
    return float("nan") if v is None else float(v)


def plot_reward_curves(steps: list[dict[str, Any]], path: str | Path, title: str) -> Path:
    """Reward mean (with a +-std band), outcome rate and dropped rollouts per step, written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")  # no display on workers and CI
    import matplotlib.pyplot as plt

    x = [s["step"] for s in steps]
    mean = [_value(s["reward_mean"]) for s in steps]
    std = [_value(s["reward_std"]) for s in steps]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    try:
        top.plot(x, mean, marker="o", label="reward mean (kept rollouts)")
        top.fill_between(x, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)], alpha=0.2,
                         label="+- std")
        top.plot(x, [_value(s["outcome_rate"]) for s in steps], marker="s", label="outcome (solved) rate")
        top.set_ylabel("reward / rate")
        top.legend(loc="best", fontsize=8)
        top.set_title(title, fontsize=9)
        for key, label in (("drop_format_error", "format error"), ("drop_no_final_output", "no final output"),
                           ("drop_low_std_group", "low-std group")):
            bottom.plot(x, [s[key] for s in steps], marker=".", label=label)
        bottom.set_ylabel("rollouts dropped")
        bottom.set_xlabel("optimizer step")
        bottom.legend(loc="best", fontsize=8)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial.png")
        fig.savefig(partial, dpi=100)
        partial.replace(path)
    finally:
        plt.close(fig)
    return path


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def run_markdown(run: dict[str, Any], steps: list[dict[str, Any]]) -> str:
    """The Prefect artifact's text for a ``training_runs`` row and its ``training_steps``."""
    lines = [
        f"# Training run `{run['run_id']}`",
        "",
        f"- **status:** {run['status']}; **steps:** {run['global_step']} / {run['max_steps']}"
        + (f"; resumed {run['resumes']} time(s), last from `{run['resumed_from']}`" if run["resumes"] else ""),
        f"- **snapshot:** `{run['snapshot_id']}`; **profile:** `{run['profile']}`; **config** `{run['config_hash']}`",
        f"- **instances:** {run['instances']}; "
        f"**preference run:** `{run['preference_run_id'] or 'none (accuracy-first)'}`; "
        f"**pricing seed:** {run['pricing_seed']} (training schedules only)",
        f"- **final checkpoint:** `{run['final_checkpoint']}`",
        f"- **reward curves:** `{run['reward_curve_png']}`",
        "",
        "| step | reward mean | reward std | outcome rate | cost | completion tokens "
        "| dropped fmt / no-final / low-std | loss | seconds |",
        "|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for s in steps:
        lines.append(f"| {s['step']} | {_fmt(s['reward_mean'])} | {_fmt(s['reward_std'])} | {_fmt(s['outcome_rate'])} "
                     f"| {_fmt(s['cost_mean'], 5)} | {_fmt(s['completion_tokens'], 0)} "
                     f"| {s['drop_format_error']} / {s['drop_no_final_output']} / {s['drop_low_std_group']} "
                     f"| {_fmt(s['loss'], 4)} | {_fmt(s['seconds'], 1)} |")
    return "\n".join(lines) + "\n"
