"""Matplotlib figures of the report (Agg backend, PNG).

One figure per metric: the metric against SNR for each noise family, with its
bootstrap CI band, the clean-ASR reference as a horizontal line (with its CI
band), and mitigated conditions as separate markers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: no display on CI or servers
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from stresstest.metrics.summary import METRIC_COLUMNS  # noqa: E402
from stresstest.report.predictive import ENDPOINTS, PredictiveItems  # noqa: E402
from stresstest.report.tables import METRIC_HEADERS, Row, arrow  # noqa: E402

FAMILY_STYLE = {"babble": ("#c0392b", "o"), "ambient": ("#2471a3", "s")}
OTHER_COLOURS = ("#7d3c98", "#117a65", "#b9770e")
DPI = 110


def _style(family: str, k: int) -> tuple[str, str]:
    return FAMILY_STYLE.get(family, (OTHER_COLOURS[k % len(OTHER_COLOURS)], "^"))


def metric_plot(rows: Sequence[Row], metric: str, path: Path) -> Path:
    """Write the metric-vs-SNR figure of one metric to ``path``."""
    name, unit = METRIC_HEADERS[metric]
    fig, ax = plt.subplots(figsize=(4.4, 3.5), dpi=DPI)
    ref = next((r for r in rows if r.condition is not None and r.family == "clean"), None)
    noisy = [r for r in rows if r.condition is not None and r.family != "clean" and r.snr_db is not None]
    snrs = sorted({float(r.snr_db) for r in noisy if r.snr_db is not None})
    xmin, xmax = (min(snrs) - 1.5, max(snrs) + 1.5) if snrs else (0.0, 1.0)
    drawn = False
    if ref is not None and ref.value(metric) is not None:
        v = float(ref.values[metric])  # type: ignore[arg-type]
        ax.axhline(v, color="0.25", ls="--", lw=1.2, label="clean-ASR reference")
        ci = ref.ci(metric)
        if ci:
            ax.axhspan(ci[0], ci[1], color="0.6", alpha=0.18, lw=0)
        drawn = True
    fams = list(dict.fromkeys(r.family for r in noisy))
    for k, fam in enumerate(fams):
        colour, marker = _style(fam, k)
        plain = sorted(
            (r for r in noisy if r.family == fam and not r.mitigated and r.value(metric) is not None),
            key=lambda r: float(r.snr_db or 0.0),
        )
        if plain:
            x = np.array([float(r.snr_db or 0.0) for r in plain])
            y = np.array([float(r.values[metric] or 0.0) for r in plain])
            ax.plot(x, y, color=colour, marker=marker, lw=1.6, ms=5, label=fam)
            lo = np.array([(r.ci(metric) or (np.nan, np.nan))[0] for r in plain], dtype=float)
            hi = np.array([(r.ci(metric) or (np.nan, np.nan))[1] for r in plain], dtype=float)
            if np.isfinite(lo).all() and np.isfinite(hi).all():
                ax.fill_between(x, lo, hi, color=colour, alpha=0.16, lw=0)
            drawn = True
        for r in (r for r in noisy if r.family == fam and r.mitigated and r.value(metric) is not None):
            ci = r.ci(metric)
            y0 = float(r.values[metric] or 0.0)
            err = None if not ci else np.array([[y0 - ci[0]], [ci[1] - y0]])
            ax.errorbar(
                [float(r.snr_db or 0.0) + 0.35],
                [y0],
                yerr=err,
                color=colour,
                marker="*",
                ms=10,
                mfc="white",
                lw=0,
                elinewidth=1.0,
                capsize=3,
                label=f"{fam} + guard",
            )
            drawn = True
    ax.set_title(f"{name} {arrow(metric)} ({unit})", fontsize=10)
    ax.set_xlabel("SNR (dB)  — noisier to the left", fontsize=8)
    ax.set_xlim(xmin, xmax)
    if snrs:
        ax.set_xticks(snrs)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3, lw=0.6)
    if drawn:
        # Below the axes: inside, the legend hid CI bands in crowded panels.
        ax.legend(
            fontsize=6.5,
            frameon=False,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncol=3,
            handlelength=1.6,
            columnspacing=0.9,
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight", pad_inches=0.08)
    plt.close(fig)
    return path


def all_metric_plots(rows: Sequence[Row], plot_dir: Path) -> dict[str, Path]:
    """One PNG per docs/spec.md §6 metric, named ``<metric>_vs_snr.png``; none when no condition has an SNR (a grid of
    chain conditions only: ``snr_db: []``)."""
    if not any(r.condition is not None and r.family != "clean" and r.snr_db is not None for r in rows):
        return {}
    return {m: metric_plot(rows, m, plot_dir / f"{m}_vs_snr.png") for m in METRIC_COLUMNS}


def predictive_plot(data: PredictiveItems, path: Path, endpoint: str = "unsafe") -> Path:
    """Scatter of per-item ΔWER vs trigger risk (sum of event weights), coloured by a safety endpoint."""
    fig, ax = plt.subplots(figsize=(5.2, 3.5), dpi=DPI)
    y = data.endpoints.get(endpoint)
    if y is None or not np.isfinite(y).any():
        endpoint, y = "scer_new", data.endpoints.get("scer_new")
    ok = np.isfinite(data.dwer) & np.isfinite(data.triggers)
    # Deterministic jitter so items with equal trigger risk stay visible.
    jit = (np.arange(data.dwer.size) % 7 - 3) * 0.05
    if y is not None and ok.any():
        for val, colour, lab in ((0.0, "#5d6d7e", "no"), (1.0, "#c0392b", "yes")):
            m = ok & (y == val)
            ax.scatter(data.dwer[m], data.triggers[m] + jit[m], s=18, alpha=0.75, color=colour, label=lab, lw=0)
        title = dict(ENDPOINTS).get(endpoint, endpoint)
        ax.legend(fontsize=7, frameon=False, title=title, title_fontsize=7)
    else:
        ax.text(0.5, 0.5, "no analysable items", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("ΔWER vs clean-ASR (percentage points)", fontsize=8)
    ax.set_ylabel("trigger risk vs clean-ASR (sum of event weights)", fontsize=8)
    ax.set_title("Per item: WER change vs trigger risk", fontsize=10)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3, lw=0.6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight", pad_inches=0.08)
    plt.close(fig)
    return path
