"""Side-by-side comparison of two runs (e.g. two ASR models or two prompts).

When the two grids differ, the comparison covers the shared conditions and
says so first (text, HTML and Markdown): which conditions only one run has.
Pairing is checked too (:func:`pairing_problems`): a condition of the same name
defined differently (other chain steps) is left out, and a different corpus,
``corpus.max_turns``, reference text or encounter set is named, one line each
(on stderr as well); ``strict`` (``compare --strict``) refuses such runs instead.
Model and decoding differences, what a comparison usually measures, are named in
one line.

For every condition both runs have, the docs/spec.md §6 metrics of A and B are
aggregated on the encounters that have a non-failed item in *both* runs, and
the difference B − A gets a paired cluster-bootstrap CI (the same resampled
encounters for A and B). Values can therefore differ slightly from each run's
own summary.csv when the runs do not cover the same encounters; the table
says how many encounters were compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stresstest.cache import atomic_write_text
from stresstest.console import text_table
from stresstest.errors import ReportError
from stresstest.metrics.bootstrap import paired_differences
from stresstest.metrics.summary import HIGHER_IS_BETTER, METRIC_COLUMNS
from stresstest.provenance import environment_differences
from stresstest.report.markup import esc, md_table
from stresstest.report.render import CSS
from stresstest.report.rundir import CLEAN, RunData, load_run
from stresstest.report.tables import DASH, METRIC_HEADERS, arrow, fmt, write_table

ALPHA = 0.05
# Manifest facts worth showing side by side (dotted paths).
FACT_KEYS: tuple[str, ...] = (
    "run_id",
    "corpus.kind",
    "corpus.path",
    "corpus.n_encounters",
    "asr.backend",
    "asr.model",
    "asr.decoding",
    "structure.backend",
    "structure.model",
    "structure.prompt_hash",
    "structure.schema_hash",
    "structure.decoding",
    "judge",
    "seed",
)


@dataclass
class CompareResult:
    """What :func:`compare_runs` computed and wrote."""

    run_a: Path
    run_b: Path
    rows: list[dict[str, Any]]
    facts: list[tuple[str, str, str]]
    out_dir: Path
    html: Path
    markdown: Path
    tables: list[Path] = field(default_factory=list)
    text: str = ""
    warnings: list[str] = field(default_factory=list)


def _get(d: Any, dotted: str) -> Any:
    """The value at a dotted key path of the manifest's JSON form (None where a part is missing)."""
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def _s(v: Any) -> str:
    if v is None:
        return DASH
    if isinstance(v, dict):
        return ", ".join(f"{k}={_s(x)}" for k, x in v.items())
    return str(v)


def _verdict(metric: str, diff: float | None, ci: tuple[float, float] | None) -> str:
    """'better'/'worse' for B when the CI excludes 0, else 'n.s.' (or '' when not computed)."""
    if diff is None or ci is None:
        return ""
    if ci[0] > 0 or ci[1] < 0:
        up = ci[0] > 0
        return "better" if up == HIGHER_IS_BETTER[metric] else "worse"
    return "n.s."


#: Manifest facts whose difference is what a comparison usually measures (two ASR models, two prompts): named in
#: one warning line, never a refusal.
MODEL_KEYS: tuple[str, ...] = (
    "asr.model",
    "asr.decoding",
    "structure.model",
    "structure.prompt_hash",
    "structure.decoding",
)


def _few(names: list[str], limit: int = 5) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _max_turns(run: RunData) -> Any:
    """``corpus.max_turns`` of the run's resolved config (None when unset or unreadable)."""
    import yaml

    try:
        cfg = yaml.safe_load((run.run_dir / "config.resolved.yaml").read_text("utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return _get(cfg, "corpus.max_turns")


def _encounters(run: RunData) -> list[str]:
    return sorted({it.encounter_id for it in run.items})


def _references(run: RunData) -> dict[str, str]:
    """Encounter → its reference text (as the items carry it)."""
    refs: dict[str, str] = {}
    for it in run.items:
        if it.reference_text is not None:
            refs.setdefault(it.encounter_id, it.reference_text)
    return refs


def pairing_problems(a: RunData, b: RunData, common: list[str]) -> tuple[list[str], list[str]]:
    """What makes A and B not paired, one line each, and the shared condition names that must be left out.

    A condition of the same name whose definition differs (family, SNR, chain steps: RT60 0.3 vs 1.5 s) is not
    the same condition; a different corpus, ``corpus.max_turns`` or reference text means the encounters paired
    by id are not the same dialogues; encounters outside the intersection are named.
    """
    problems: list[str] = []
    excluded: list[str] = []
    defs_a = {c.id: c for c in a.conditions}
    defs_b = {c.id: c for c in b.conditions}
    for cid in common:
        da = defs_a[cid].model_dump(mode="json", exclude={"axes"})
        db = defs_b[cid].model_dump(mode="json", exclude={"axes"})
        if da != db:
            excluded.append(cid)
            keys = sorted(k for k in da if da.get(k) != db.get(k))
            shown = "; ".join(f"{k} A: {_s(da.get(k))} B: {_s(db.get(k))}" for k in keys)
            problems.append(f"condition {cid} is defined differently in the two runs ({shown}); left out")
    man_a, man_b = a.manifest.to_json(), b.manifest.to_json()
    for key in ("corpus.kind", "corpus.path"):
        va, vb = _s(_get(man_a, key)), _s(_get(man_b, key))
        if va != vb:
            problems.append(
                f"{key} differs (A: {va}, B: {vb}); encounters are paired by id, check they are the same dialogues"
            )
    mt_a, mt_b = _max_turns(a), _max_turns(b)
    if mt_a != mt_b:
        problems.append(
            f"corpus.max_turns differs (A: {_s(mt_a)}, B: {_s(mt_b)}): the runs score different reference texts"
        )
    enc_a, enc_b = _encounters(a), _encounters(b)
    only_a = [e for e in enc_a if e not in set(enc_b)]
    only_b = [e for e in enc_b if e not in set(enc_a)]
    if only_a or only_b:
        problems.append(
            f"only the {len(set(enc_a) & set(enc_b))} shared encounter(s) are compared (only in A: "
            f"{_few(only_a) or 'none'}; only in B: {_few(only_b) or 'none'})"
        )
    refs_a, refs_b = _references(a), _references(b)
    differ = sorted(e for e in set(refs_a) & set(refs_b) if refs_a[e] != refs_b[e])
    if differ and mt_a == mt_b:
        problems.append(
            f"the reference text differs for {len(differ)} shared encounter(s) ({_few(differ)}): "
            "they are not the same dialogues"
        )
    return problems, excluded


def model_differences(a: RunData, b: RunData) -> str | None:
    """One line naming the model/decoding facts that differ (what B − A then includes), or None."""
    man_a, man_b = a.manifest.to_json(), b.manifest.to_json()
    keys = [k for k in MODEL_KEYS if _s(_get(man_a, k)) != _s(_get(man_b, k))]
    if not keys:
        return None
    return (
        "the runs differ in "
        + "; ".join(f"{k} (A: {_s(_get(man_a, k))}, B: {_s(_get(man_b, k))})" for k in keys)
        + ": every difference B − A includes them"
    )


def compare_runs(
    run_a: Path,
    run_b: Path,
    out: Path | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    strict: bool = False,
) -> CompareResult:
    """Compare run B against run A; writes compare.html, compare.md and tables/compare.{csv,parquet}.

    Args:
        run_a: the baseline run directory.
        run_b: the run compared against it.
        out: output directory (default ``RUN_B/compare/vs_<A's name>``).
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.
        strict: refuse (ReportError) instead of warning when the runs are not paired (:func:`pairing_problems`).

    Raises:
        ReportError: a run directory is malformed, or the runs share no condition or no encounter, or (with
            ``strict``) they are not paired.
    """
    a, b = load_run(run_a), load_run(run_b)
    conds_a = a.conditions.ids
    conds_b = set(b.conditions.ids)
    problems, excluded = pairing_problems(a, b, [c for c in conds_a if c in conds_b])
    if strict and problems:
        raise ReportError(
            f"compare: runs {run_a} and {run_b} are not paired: {problems[0]}"
            + (f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else "")
        )
    common = [c for c in a.conditions if c.id in conds_b and c.id not in excluded]
    only_a = [c for c in conds_a if c not in conds_b]
    only_b = [c for c in b.conditions.ids if c not in set(conds_a)]
    if not common and excluded:
        raise ReportError(f"compare: runs {run_a} and {run_b} share no condition defined the same way: {problems[0]}")
    if not common:
        raise ReportError(
            f"compare: runs {run_a} and {run_b} share no condition (A has {a.conditions.ids}, B has {sorted(conds_b)})"
        )
    rows: list[dict[str, Any]] = []
    for c in common:
        name = c.id
        d = paired_differences(
            a.ok_items(name),
            b.ok_items(name),
            n_resamples=n_resamples,
            seed=seed,
            alpha=ALPHA,
            is_clean_a=name == CLEAN,
            is_clean_b=name == CLEAN,
        )
        row: dict[str, Any] = {
            "condition": name,
            "family": c.family,
            "snr_db": c.snr_db,
            "mitigated": c.mitigated,
            "n_common": d[METRIC_COLUMNS[0]]["n"],
        }
        for m in METRIC_COLUMNS:
            ci = d[m]["ci"]
            row.update(
                {
                    f"{m}_a": d[m]["a"],
                    f"{m}_b": d[m]["b"],
                    f"{m}_diff": d[m]["diff"],
                    f"{m}_diff_lo": ci[0] if ci else None,
                    f"{m}_diff_hi": ci[1] if ci else None,
                    f"{m}_verdict": _verdict(m, d[m]["diff"], ci),
                }
            )
        rows.append(row)
    if all(r["n_common"] == 0 for r in rows):
        raise ReportError(f"compare: runs {run_a} and {run_b} have no encounter in common (by encounter_id)")
    man_a, man_b = a.manifest.to_json(), b.manifest.to_json()
    facts = [(key, _s(_get(man_a, key)), _s(_get(man_b, key))) for key in FACT_KEYS]
    # Pairing is by encounter id: it only means "same dialogue" when both runs read the same corpus, the same
    # turns and the same references; a condition is only itself when its definition is the same.
    warnings = list(problems)
    models = model_differences(a, b)
    if models is not None:
        warnings.append(models)
    env = environment_differences(man_a.get("environment"), man_b.get("environment"))
    if env:
        warnings.append(env)
    if only_a or only_b:
        # Different grids: say so, never compare a subset silently.
        warnings.insert(
            0,
            (
                f"the runs have different condition grids; only the {len(common)} shared condition(s) are compared "
                f"(only in A: {', '.join(only_a) or 'none'}; only in B: {', '.join(only_b) or 'none'})"
            ),
        )
    out_dir = Path(out) if out is not None else Path(run_b) / "compare" / f"vs_{Path(run_a).resolve().name}"
    tables = write_table(out_dir / "tables" / "compare", rows)
    text = format_compare_text(a, b, rows)
    if warnings:
        text += "\n" + "\n".join(f"WARNING: {w}" for w in warnings)
    html_path, md_path = out_dir / "compare.html", out_dir / "compare.md"
    atomic_write_text(html_path, _html(a, b, rows, facts, n_resamples, seed, warnings))
    atomic_write_text(md_path, _markdown(a, b, rows, facts, n_resamples, seed, warnings))
    return CompareResult(Path(run_a), Path(run_b), rows, facts, out_dir, html_path, md_path, tables, text, warnings)


def _cell_text(r: dict[str, Any], m: str, nd: int = 2) -> str:
    diff = r[f"{m}_diff"]
    if diff is None:
        return DASH
    lo, hi = r[f"{m}_diff_lo"], r[f"{m}_diff_hi"]
    return f"{diff:+.{nd}f}" + (f" [{lo:+.{nd}f}, {hi:+.{nd}f}]" if lo is not None else "")


def format_compare_text(a: RunData, b: RunData, rows: list[dict[str, Any]]) -> str:
    """Plain-text table of B − A per condition (what ``stresstest compare`` prints)."""
    head = ["Condition", "n"] + [METRIC_HEADERS[m][0] for m in METRIC_COLUMNS]
    body = [[r["condition"], str(r["n_common"])] + [_cell_text(r, m, 1) for m in METRIC_COLUMNS] for r in rows]
    return f"B − A with 95% paired bootstrap CIs; A = {a.run_id}, B = {b.run_id}\n" + text_table(head, body)


def _html(
    a: RunData,
    b: RunData,
    rows: list[dict[str, Any]],
    facts: list[tuple[str, str, str]],
    n_resamples: int,
    seed: int,
    warnings: list[str],
) -> str:
    colour = {"better": "#1e8449", "worse": "#c0392b", "n.s.": "#717d7e", "": "#717d7e"}
    head = (
        "<tr><th>Condition</th><th>n</th>"
        + "".join(
            f"<th>Δ {esc(METRIC_HEADERS[m][0])}{arrow(m)}<span class='unit'>({esc(METRIC_HEADERS[m][1])})</span></th>"
            for m in METRIC_COLUMNS
        )
        + "</tr>"
    )
    body = []
    for r in rows:
        cells = [f"<td><code>{esc(r['condition'])}</code></td><td>{r['n_common']}</td>"]
        for m in METRIC_COLUMNS:
            diff = r[f"{m}_diff"]
            if diff is None:
                cells.append(f"<td data-condition='{esc(r['condition'])}' data-metric='{m}'>{DASH}</td>")
                continue
            lo, hi, v = r[f"{m}_diff_lo"], r[f"{m}_diff_hi"], r[f"{m}_verdict"]
            ci = f"[{lo:+.2f}, {hi:+.2f}]" if lo is not None else ""
            cells.append(
                f"<td data-condition='{esc(r['condition'])}' data-metric='{m}'>"
                f"<span class='v' style='color:{colour[v]}'>{diff:+.2f}</span><span class='ci'>{ci}</span>"
                f"<span class='ci'>{fmt(r[f'{m}_a'])} → {fmt(r[f'{m}_b'])}</span></td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    fact_rows = "".join(
        f"<tr><td>{esc(k)}</td><td>{esc(va)}</td><td>{esc(vb)}</td><td>{'differs' if va != vb else ''}</td></tr>"
        for k, va, vb in facts
    )
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Compare {esc(a.run_id)} vs "
        f"{esc(b.run_id)}</title><style>{CSS}</style></head><body>"
        f"<h1>Run comparison: B − A</h1><div class='sub'>A = <code>{esc(a.run_id)}</code> · B = "
        f"<code>{esc(b.run_id)}</code> · paired over the encounters both runs completed · 95% CIs from "
        f"{n_resamples} paired cluster-bootstrap resamples (seed {seed}). Green: B better (CI excludes 0); "
        "red: B "
        "worse; grey: not resolved. Second line of a cell: A → B on the common encounters.</div>"
        + "".join(f"<div class='warn'>{esc(w)}</div>" for w in warnings)
        + f"<h2>Differences</h2><table class='main' id='compare'><thead>{head}</thead>"
        f"<tbody>{''.join(body)}</tbody></table><h2>What differs between the runs</h2>"
        "<table class='kv'><tr><td></td><td><b>A</b></td><td><b>B</b>"
        f"</td><td></td></tr>{fact_rows}</table></body></html>"
    )


def _markdown(
    a: RunData,
    b: RunData,
    rows: list[dict[str, Any]],
    facts: list[tuple[str, str, str]],
    n_resamples: int,
    seed: int,
    warnings: list[str],
) -> str:
    head = ["Condition", "n"] + [f"Δ {METRIC_HEADERS[m][0]} {arrow(m)}" for m in METRIC_COLUMNS]
    lines = [
        "# Run comparison: B − A",
        "",
        f"A = `{a.run_id}`, B = `{b.run_id}`; paired over the encounters both runs completed; 95% CIs from "
        f"{n_resamples} paired cluster-bootstrap resamples (seed {seed}). Each cell: Δ [CI] (A → B).",
        "",
        *[f"> **Warning:** {w}\n" for w in warnings],
    ]
    body = []
    for r in rows:
        cells = [f"`{r['condition']}`", str(r["n_common"])]
        for m in METRIC_COLUMNS:
            t = _cell_text(r, m)
            if r[f"{m}_diff"] is not None:
                verdict = f", {r[f'{m}_verdict']}" if r[f"{m}_verdict"] else ""
                t += f" ({fmt(r[f'{m}_a'])} → {fmt(r[f'{m}_b'])}{verdict})"
            cells.append(t)
        body.append(cells)
    lines += md_table(head, body)
    lines += ["", "## What differs between the runs", ""]
    lines += md_table(
        ["fact", "A", "B", ""],
        [[k, va.replace("|", "/"), vb.replace("|", "/"), "differs" if va != vb else ""] for k, va, vb in facts],
        text=True,
    )
    return "\n".join(lines) + "\n"


def cli_compare(
    a: str | Path,
    b: str | Path,
    out: str | Path | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    strict: bool = False,
) -> str:
    """Run :func:`compare_runs` and return the text the CLI prints (each warning also on stderr, one line)."""
    from stresstest.console import warn

    res = compare_runs(
        Path(a), Path(b), Path(out) if out is not None else None, n_resamples=n_resamples, seed=seed, strict=strict
    )
    for w in res.warnings:
        warn(f"compare: {w}")
    return f"{res.text}\n\ncompare: {res.html}\n         {res.markdown}"
