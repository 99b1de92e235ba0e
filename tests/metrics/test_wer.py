"""WER / InsRate counts: the documented normaliser and equality with jiwer."""

from __future__ import annotations

import csv
from pathlib import Path

import jiwer
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stresstest.errors import MetricError
from stresstest.metrics.align import align
from stresstest.metrics.wer import AsrErrors, asr_errors, ins_rate_percent, normalise, wer_percent

ACI = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora" / "aci-bench" / "src_experiment_data"
PAIRS = [("virtscribe_asr", "virtscribe_humantrans"), ("aci_asr", "aci_asrcorr")]


def _read(path: Path) -> dict[str, str]:
    csv.field_size_limit(1 << 30)
    with path.open(newline="", encoding="utf-8") as fh:
        return {row["id"]: row["dialogue"] for row in csv.DictReader(fh)}


def aci_pairs(kind: tuple[str, str]) -> list[tuple[str, str, str]]:
    """(encounter id, reference, hypothesis) joined on the encounter id."""
    if not ACI.is_dir():
        pytest.skip(f"ACI-BENCH ASR pairs not found at {ACI}")
    out = []
    for split in ("test1", "test2"):
        hyp = _read(ACI / f"{split}_{kind[0]}.csv")
        ref = _read(ACI / f"{split}_{kind[1]}.csv")
        assert set(hyp) == set(ref), f"{split}: ids differ between {kind[0]} and {kind[1]}"
        out += [(k, ref[k], hyp[k]) for k in sorted(ref)]
    return out


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Um, I DON'T have a fever.", "i do not have a fever"),
        ("three or four flights of stairs", "3 or 4 flights of stairs"),
        ("twenty five milligrams", "25 milligrams"),
        ("The colour of the haemoglobin", "the color of the hemoglobin"),
        ("[doctor] hello   there", "hello there"),
        ("uh, hmm, okay", "okay"),
        ("25mg", "25 mg"),
        ("", ""),
    ],
)
def test_normalise_documented_rules(raw: str, expected: str) -> None:
    assert normalise(raw) == expected


def test_counts_small_example() -> None:
    e = asr_errors("I don't have chest pain today", "I do have chest pains today now")
    # ref: i do not have chest pain today (7); hyp: i do have chest pains today now
    assert e == AsrErrors(sub=1, dele=1, ins=1, hits=5, ref_words=7)
    assert e.errors == 3


def test_benign_forms_are_not_errors() -> None:
    assert asr_errors("Um, I can't walk three flights.", "i can not walk 3 flights").errors == 0


def test_empty_reference_counts_every_hyp_word_as_insertion() -> None:
    assert asr_errors("", "metformin twice daily") == AsrErrors(0, 0, 3, 0, 0)
    assert asr_errors("um.", "") == AsrErrors(0, 0, 0, 0, 0)
    assert asr_errors("no fever", "") == AsrErrors(0, 2, 0, 0, 2)


def test_rates_micro_average() -> None:
    errs = [AsrErrors(1, 0, 1, 8, 9), AsrErrors(0, 1, 0, 0, 1)]
    assert wer_percent(errs) == pytest.approx(100 * 3 / 10)
    assert ins_rate_percent(errs) == pytest.approx(100 * 1 / 10)


def test_rates_without_reference_words_raise() -> None:
    with pytest.raises(MetricError, match="0 normalised reference words"):
        wer_percent([AsrErrors(0, 0, 4, 0, 0)])
    with pytest.raises(MetricError):
        ins_rate_percent([])


@pytest.mark.parametrize("kind", PAIRS, ids=lambda k: k[0])
def test_equals_jiwer_on_aci_bench(kind: tuple[str, str]) -> None:
    pairs = aci_pairs(kind)
    errs = [asr_errors(r, h) for _, r, h in pairs]
    refs = [normalise(r) for _, r, _ in pairs]
    hyps = [normalise(h) for _, _, h in pairs]
    out = jiwer.process_words(refs, hyps)
    assert wer_percent(errs) == pytest.approx(100 * jiwer.wer(refs, hyps))
    assert ins_rate_percent(errs) == pytest.approx(100 * out.insertions / sum(len(r.split()) for r in refs))
    assert sum(e.sub for e in errs) == out.substitutions
    assert sum(e.dele for e in errs) == out.deletions
    assert sum(e.ins for e in errs) == out.insertions
    # The aligned diff sees the same edits (a few encounters keep the suite fast).
    for (_, r, h), e in list(zip(pairs, errs, strict=True))[::8]:
        p = align(r, h)
        assert (p.substitutions, p.deletions, p.insertions, p.hits) == (e.sub, e.dele, e.ins, e.hits)


def test_item_fields_feed_the_summary() -> None:
    from stresstest.metrics.summary import aggregate

    items = [
        asr_errors("no chest pain today", "chest pain today now").item_fields(),
        asr_errors("take 5 mg", "take 5 mg").item_fields(),
    ]
    assert items[0] == {"asr_sub": 0, "asr_del": 1, "asr_ins": 1, "ref_words": 4}
    rates = aggregate([{"encounter_id": f"e{k}", "condition": "c", **it} for k, it in enumerate(items)])
    assert rates["wer"] == pytest.approx(100 * 2 / 7)
    assert rates["ins_rate"] == pytest.approx(100 * 1 / 7)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["no", "chest", "pain", "two", "days", "mg", "uh", "the", "25"]), max_size=12),
    st.lists(st.sampled_from(["no", "chest", "pain", "too", "days", "milligrams", "the", "25", "five"]), max_size=12),
)
def test_counts_from_one_alignment_equal_jiwer(ref_words: list[str], hyp_words: list[str]) -> None:
    # The score stage aligns each pair once and reads the WER counts off that alignment.
    ref, hyp = " ".join(ref_words), " ".join(hyp_words)
    assert AsrErrors.from_pair(align(ref, hyp)) == asr_errors(ref, hyp)
