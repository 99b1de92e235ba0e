"""Scoring rules of the note-quality judges (docs/spec.md §8): entailment, hallucination, pairwise preference.

Pure functions over judge verdicts, so the rules are tested on recorded outputs without a model.

**Entailment** (completeness, conciseness, groundedness). Each hypothesis statement gets one label;
weights entailed = 1, partially entailed = ½, not entailed = 0; *not applicable* is excluded from
numerator and denominator. An item's score is ``100 · Σ w / #applicable`` and **100 when every
hypothesis is not applicable** (boilerplate-only text is not penalised). Which text is premise and
which supplies the hypotheses decides the measure:

============== ===================== ========================
measure        premise               hypotheses
============== ===================== ========================
completeness   generated record      gold (reference) record
conciseness    gold record           generated record
groundedness   transcript x(c)       generated record
============== ===================== ========================

**Hallucination** (``halluc_lexical``, ``halluc_inference``): every statement of the record is judged
against its transcript once by a literal judge (supported only if stated explicitly) and once by an
inference-aware judge that also accepts paraphrase, trade/generic equivalence, abstraction of findings
and sound clinical inference (its ``basis`` is one of :data:`INFERENCE_BASES`; fabricated and
contradicted are the unsupported ones). An item's rate is ``100 · #unsupported / #statements``.

**Pairwise** (the PDSQI-9-derived dimensions). A pair (X, Y) is judged twice: X as Note A and Y as
Note B, then swapped. Each verdict is mapped from position back to system (``x`` / ``y`` / ``tie``);
the pair's outcome on a dimension is ``x`` or ``y`` only when both orders name it, otherwise ``tie``.
**Overall** is ``x`` (``y``) when that side wins at least 5 of the 8 core dimensions after
adjudication, else ``tie``; ``cited`` is reported but is not one of the 8 (the source study left it
out). Summaries are win / tie / loss shares from Y's side and the tie-adjusted preference score
``PS(Y) = 100 · (N_y + ½ N_tie) / N`` (50 = no preference), with 95% cluster-bootstrap CIs over
encounters (all outcomes of one encounter are resampled together).

Per condition, every measure is the mean of the item scores over the items that have one (a failed
judge call leaves the item out of that measure and is recorded with its reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from stresstest.errors import MetricError
from stresstest.metrics.bootstrap import Interval, bootstrap_statistic

EntailmentLabel = Literal["entailed", "partially_entailed", "not_entailed", "not_applicable"]
ENTAILMENT_LABELS: tuple[str, ...] = ("entailed", "partially_entailed", "not_entailed", "not_applicable")
ENTAILMENT_WEIGHTS: dict[str, float] = {"entailed": 1.0, "partially_entailed": 0.5, "not_entailed": 0.0}
ENTAILMENT_MEASURES: tuple[str, ...] = ("completeness", "conciseness", "groundedness")

LEXICAL_VERDICTS: tuple[str, ...] = ("supported", "unsupported")
INFERENCE_BASES: tuple[str, ...] = (
    "direct",
    "paraphrase",
    "trade_generic",
    "abstraction",
    "inference",
    "fabricated",
    "contradicted",
)
UNSUPPORTED_BASES: frozenset[str] = frozenset({"fabricated", "contradicted"})
HALLUCINATION_MEASURES: tuple[str, ...] = ("halluc_lexical", "halluc_inference")

CORE_DIMENSIONS: tuple[str, ...] = (
    "accurate",
    "thorough",
    "useful",
    "organized",
    "comprehensible",
    "succinct",
    "synthesized",
    "stigmatizing",
)
EXTRA_DIMENSIONS: tuple[str, ...] = ("cited",)
PAIRWISE_DIMENSIONS: tuple[str, ...] = CORE_DIMENSIONS + EXTRA_DIMENSIONS
OVERALL = "overall"
OVERALL_MIN_WINS = 5
Side = Literal["x", "y", "tie"]
POSITION_VERDICTS: tuple[str, ...] = ("A", "B", "tie")


def entailment_score(labels: Iterable[str]) -> float | None:
    """Item score in percent from hypothesis labels (module docstring); None when there are no labels.

    Raises:
        MetricError: a label that is not one of :data:`ENTAILMENT_LABELS`.
    """
    labels = list(labels)
    if not labels:
        return None
    bad = [lab for lab in labels if lab not in ENTAILMENT_LABELS]
    if bad:
        raise MetricError(f"entailment: unknown label(s) {sorted(set(bad))}; expected one of {ENTAILMENT_LABELS}")
    weights = [ENTAILMENT_WEIGHTS[lab] for lab in labels if lab != "not_applicable"]
    if not weights:
        return 100.0
    return 100.0 * sum(weights) / len(weights)


def lexical_rate(verdicts: Iterable[str]) -> float | None:
    """``halluc_lexical`` of one item: percent of statements judged unsupported; None without statements."""
    v = list(verdicts)
    if not v:
        return None
    bad = [x for x in v if x not in LEXICAL_VERDICTS]
    if bad:
        raise MetricError(f"hallucination: unknown verdict(s) {sorted(set(bad))}; expected {LEXICAL_VERDICTS}")
    return 100.0 * sum(1 for x in v if x == "unsupported") / len(v)


def inference_rate(bases: Iterable[str]) -> float | None:
    """``halluc_inference`` of one item: percent of statements whose basis is fabricated or contradicted."""
    b = list(bases)
    if not b:
        return None
    bad = [x for x in b if x not in INFERENCE_BASES]
    if bad:
        raise MetricError(f"hallucination: unknown basis {sorted(set(bad))}; expected one of {INFERENCE_BASES}")
    return 100.0 * sum(1 for x in b if x in UNSUPPORTED_BASES) / len(b)


def to_side(verdict: str, swapped: bool) -> Side:
    """Map a positional verdict (``A`` / ``B`` / ``tie``) back to the system it names.

    Args:
        verdict: what the judge answered.
        swapped: False for the pass with X as Note A, True for the pass with Y as Note A.
    """
    if verdict == "tie":
        return "tie"
    if verdict not in ("A", "B"):
        raise MetricError(f"pairwise: verdict {verdict!r}; expected one of {POSITION_VERDICTS}")
    first = verdict == "A"
    return "x" if first != swapped else "y"


def adjudicate(z1: Side, z2: Side) -> Side:
    """The conservative agreement rule: a side wins only when both orders name it, else a tie."""
    return z1 if z1 == z2 and z1 in ("x", "y") else "tie"


def overall(outcomes: Mapping[str, Side]) -> Side:
    """Overall outcome: the side that wins at least 5 of the 8 core dimensions, else a tie.

    Raises:
        MetricError: a core dimension is missing.
    """
    missing = [d for d in CORE_DIMENSIONS if d not in outcomes]
    if missing:
        raise MetricError(f"pairwise overall: missing dimension(s) {missing}")
    for side in ("x", "y"):
        if sum(1 for d in CORE_DIMENSIONS if outcomes[d] == side) >= OVERALL_MIN_WINS:
            return side
    return "tie"


def adjudicate_pair(first: Mapping[str, str], second: Mapping[str, str]) -> dict[str, Any]:
    """Outcomes of one pair from its two passes' raw verdicts.

    Args:
        first: ``{dimension: 'A'|'B'|'tie'}`` with X as Note A.
        second: the same with Y as Note A.

    Returns:
        ``{"outcomes": {dim: side, ..., "overall": side}, "consistent": n, "judged": n}`` where
        ``consistent`` counts the dimensions whose two passes named the same side (ties included).
    """
    outcomes: dict[str, Side] = {}
    consistent = 0
    for d in PAIRWISE_DIMENSIONS:
        if d not in first or d not in second:
            raise MetricError(f"pairwise: dimension {d!r} missing from a verdict")
        z1, z2 = to_side(first[d], False), to_side(second[d], True)
        consistent += int(z1 == z2)
        outcomes[d] = adjudicate(z1, z2)
    outcomes[OVERALL] = overall(outcomes)
    return {"outcomes": outcomes, "consistent": consistent, "judged": len(PAIRWISE_DIMENSIONS)}


def preference_score(sides: Sequence[str]) -> float | None:
    """Tie-adjusted preference score of Y, ``100 · (N_y + ½ N_tie) / N``; None without outcomes."""
    if not sides:
        return None
    n_y = sum(1 for s in sides if s == "y")
    n_t = sum(1 for s in sides if s == "tie")
    return 100.0 * (n_y + 0.5 * n_t) / len(sides)


@dataclass(frozen=True)
class PairwiseStat:
    """One dimension of :func:`pairwise_summary`: percent of pairs Y wins / ties / loses, and PS of Y.

    Each share has its bootstrap CI (``*_lo`` / ``*_hi``); a share is None when not estimable. ``computed`` is
    False when there was no pair at all: then only ``dimension`` and ``n`` are written (:meth:`to_row`).
    """

    dimension: str
    n: int
    win: float | None = None
    win_lo: float | None = None
    win_hi: float | None = None
    tie: float | None = None
    tie_lo: float | None = None
    tie_hi: float | None = None
    loss: float | None = None
    loss_lo: float | None = None
    loss_hi: float | None = None
    ps: float | None = None
    ps_lo: float | None = None
    ps_hi: float | None = None
    computed: bool = field(default=True, kw_only=True)

    def to_row(self) -> dict[str, Any]:
        """The table row: ``dimension, n`` then each share with its CI (only ``dimension, n`` when no pair)."""
        row = asdict(self)
        del row["computed"]
        return row if self.computed else {"dimension": self.dimension, "n": self.n}


def pairwise_summary(
    pairs: Sequence[Mapping[str, Any]],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> list[PairwiseStat]:
    """Win / tie / loss shares and PS of Y per dimension, with encounter-cluster bootstrap CIs.

    Args:
        pairs: one mapping per judged pair with ``encounter_id`` and ``outcomes`` (``{dim: side}``,
            as from :func:`adjudicate_pair`); several pairs of one encounter (e.g. several conditions)
            are resampled together.
        n_resamples: bootstrap replicates.
        seed: generator seed.
        alpha: 1 - coverage.

    Returns:
        One :class:`PairwiseStat` per dimension (core ones, ``cited``, then ``overall``).
    """
    dims = list(PAIRWISE_DIMENSIONS) + [OVERALL]
    if not pairs:
        return [PairwiseStat(dimension=d, n=0, computed=False) for d in dims]
    eids = sorted({str(p["encounter_id"]) for p in pairs})
    pos = {e: i for i, e in enumerate(eids)}
    clusters: list[list[int]] = [[] for _ in eids]
    for k, p in enumerate(pairs):
        clusters[pos[str(p["encounter_id"])]].append(k)
    table = {d: np.array([str(p["outcomes"].get(d, "")) for p in pairs], dtype=object) for d in dims}

    def stat(idx: np.ndarray) -> dict[str, float]:
        out: dict[str, float] = {}
        for d in dims:
            col = [s for s in table[d][idx] if s in ("x", "y", "tie")]
            n = len(col)
            for name, side in (("win", "y"), ("tie", "tie"), ("loss", "x")):
                out[f"{d}.{name}"] = 100.0 * sum(1 for s in col if s == side) / n if n else float("nan")
            ps = preference_score(col)
            out[f"{d}.ps"] = float("nan") if ps is None else ps
        return out

    point, cis = bootstrap_statistic(
        [np.array(c, dtype=int) for c in clusters], stat, n_resamples=n_resamples, seed=seed, alpha=alpha
    )
    rows = []
    for d in dims:
        n = sum(1 for s in table[d] if s in ("x", "y", "tie"))
        fields: list[float | None] = []  # value, lo, hi of win, tie, loss, ps (PairwiseStat's field order)
        for name in ("win", "tie", "loss", "ps"):
            v = point[f"{d}.{name}"]
            ci: Interval | None = cis.get(f"{d}.{name}")
            fields += [None if not np.isfinite(v) else v, ci[0] if ci else None, ci[1] if ci else None]
        rows.append(PairwiseStat(d, n, *fields))
    return rows
