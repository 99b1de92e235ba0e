"""The report's figures for chain conditions: WER and Unsafe against RT60, one line per channel.

A chain condition's RT60 is its room step's ``rt60_s`` (0 = no room step: the dry, close-talk
signal); its channel is its label on a ``channel`` axis when it was expanded from ``chains.axes``,
else its steps other than the room joined with ``+`` (a noise step as its family and SNR, a silence
step as ``silence probes``; ``wideband`` when there are none), so a named chain never shares a line
with the axes' conditions unless it is one of them. Points carry the Table 2 values and their 95%
cluster-bootstrap CIs; the clean-ASR reference is the dashed line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stresstest.grid import Condition
from stresstest.noise.chain import Step
from stresstest.report.tables import METRIC_HEADERS, Row, arrow

#: Metrics drawn against RT60 and channel.
CHAIN_METRICS: tuple[str, ...] = ("wer", "unsafe")


def rt60_of(c: Condition) -> float:
    """The room step's target RT60 in seconds (0.0 without a simulated room)."""
    for raw in c.chain or []:
        step = Step.model_validate(raw)  # the recorded form {kind: {params}} of a validated step
        if step.room is not None and step.room.rt60_s is not None:
            return float(step.room.rt60_s)
    return 0.0


def channel_of(c: Condition) -> str:
    """The condition's channel label (see the module docstring)."""
    if c.axes and "channel" in c.axes:
        return c.axes["channel"]
    return "+".join(_label(Step.model_validate(raw)) for raw in c.chain or [] if "room" not in raw) or "wideband"


def _label(step: Step) -> str:
    if step.noise is not None:
        return f"{step.noise.family} {step.noise.snr_db:g} dB"
    return "silence probes" if step.silence is not None else step.kind


def chain_plots(rows: Sequence[Row], conditions: Sequence[Condition], plot_dir: Path) -> dict[str, Path]:
    """``<metric>_vs_rt60.png`` for each of :data:`CHAIN_METRICS`; empty when the run has no chain condition."""
    chained = [c for c in conditions if c.is_chain]
    if not chained:
        return {}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_id = {r.condition: r for r in rows if r.condition is not None}
    out: dict[str, Path] = {}
    for metric in CHAIN_METRICS:
        name, unit = METRIC_HEADERS[metric]
        fig, ax = plt.subplots(figsize=(4.6, 3.5), dpi=110)
        ref = by_id.get("clean")
        if ref is not None and (ref_value := ref.value(metric)) is not None:
            ax.axhline(float(ref_value), color="0.25", ls="--", lw=1.2, label="clean-ASR reference")
        channels = list(dict.fromkeys(channel_of(c) for c in chained))
        drawn = False
        for k, ch in enumerate(channels):
            pts = sorted(
                (
                    (rt60_of(c), by_id[c.id])
                    for c in chained
                    if channel_of(c) == ch and c.id in by_id and by_id[c.id].value(metric) is not None
                ),
                key=lambda p: p[0],
            )
            if not pts:
                continue
            x = [p[0] for p in pts]
            y = [float(p[1].value(metric) or 0.0) for p in pts]
            lo = [y0 - (p[1].ci(metric) or (y0, y0))[0] for y0, p in zip(y, pts, strict=True)]
            hi = [(p[1].ci(metric) or (y0, y0))[1] - y0 for y0, p in zip(y, pts, strict=True)]
            ax.errorbar(
                [v + 0.012 * (k - (len(channels) - 1) / 2) for v in x],
                y,
                yerr=[lo, hi],
                marker="os^Dv"[k % 5],
                ms=5,
                lw=1.5,
                capsize=3,
                elinewidth=0.8,
                label=ch,
            )
            drawn = True
        ax.set_title(f"{name} {arrow(metric)} ({unit}) against RT60", fontsize=10)
        ax.set_xlabel("RT60 (s)  — 0 = no room step", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3, lw=0.6)
        if drawn:
            ax.legend(
                fontsize=6.5,
                frameon=False,
                loc="upper center",
                bbox_to_anchor=(0.5, -0.2),
                ncol=3,
                title="channel",
                title_fontsize=7,
            )
        else:
            ax.text(
                0.5,
                0.5,
                "not computed in this run",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=9,
                color="0.4",
            )
        fig.tight_layout()
        path = plot_dir / f"{metric}_vs_rt60.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", bbox_inches="tight", pad_inches=0.08)
        plt.close(fig)
        out[f"{metric}_vs_rt60"] = path
    return out
