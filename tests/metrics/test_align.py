"""Aligned diff: tokenisation with offsets, op tiling and quote round-trips."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from stresstest.errors import MetricError
from stresstest.metrics.align import align, tokenize
from stresstest.metrics.wer import asr_errors, normalise

TEXTS = [
    "Um, I DON'T have a fever.",
    "I can walk about 3 or 4 flights of stairs before feeling breathless.",
    "I can walk about three or four steps, before feeling breathless!",
    "[doctor] twenty five milligrams twice a day , okay ? [patient] mm-hmm",
    "The colour of the haemoglobin... (laughs) it's fine.",
    "  leading and trailing   spaces\n\nand CRLF\r\nlines ",
    "it's been hurting since Monday, that's been going on",
    "",
    "uh, hmm.",
]


@pytest.mark.parametrize("text", TEXTS)
def test_tokens_equal_normalised_words_and_spans_are_ordered(text: str) -> None:
    tt = tokenize(text)
    assert tt.words == normalise(text).split()
    prev = (0, 0)
    for t in tt.tokens:
        assert 0 <= t.start < t.end <= len(text)
        assert (t.start, t.end) >= prev
        prev = (t.start, t.end)


def test_span_of_each_token_reads_as_that_token() -> None:
    tt = tokenize("Um, I don't have a FEVER; twenty five mg, colour.")
    got = [(t.text, tt.original[t.start : t.end]) for t in tt.tokens]
    assert got == [
        ("i", "I"),
        ("do", "don't"),
        ("not", "don't"),
        ("have", "have"),
        ("a", "a"),
        ("fever", "FEVER"),
        ("25", "twenty five"),
        ("mg", "mg"),
        ("color", "colour"),
    ]


def test_ops_tile_both_sequences_and_have_expected_kinds() -> None:
    p = align("I don't see the larger rash today", "I see the large rash today now")
    assert [o.op for o in p.ops] == ["equal", "del", "equal", "sub", "equal", "ins"]
    r = h = 0
    for o in p.ops:
        assert (o.ref_start, o.hyp_start) == (r, h)
        r, h = o.ref_end, o.hyp_end
        if o.op == "sub":
            assert o.ref_end - o.ref_start == o.hyp_end - o.hyp_start
    assert (r, h) == (len(p.ref), len(p.hyp))


def test_quotes_are_original_substrings_with_context() -> None:
    ref = "It looks a little red and tender, but I don't see that larger circular rash."
    hyp = "it looks a little red and tender but i see that larger circular rash"
    p = align(ref, hyp)
    dele = next(o for o in p.ops if o.op == "del")
    assert p.ref_quote(dele.ref_start, dele.ref_end, context=0) == "don't"
    assert p.ref_quote(dele.ref_start, dele.ref_end) == "but I don't see that"
    assert p.hyp_quote(dele.hyp_start, dele.hyp_end) == "but i see that"
    assert p.hyp_quote(dele.hyp_start, dele.hyp_end, context=0) == ""


def test_quote_round_trip_on_every_block() -> None:
    ref = "Twenty-five mg of Metformin, twice a day (with food); no chest pain since Monday."
    hyp = "25 milligrams of metformin twice daily with food and chest pain since Sunday uh"
    p = align(ref, hyp)
    for o in p.ops:
        for ctx in (0, 1, 3):
            q = p.ref_quote(o.ref_start, o.ref_end, ctx)
            assert q in ref
            assert p.hyp_quote(o.hyp_start, o.hyp_end, ctx) in hyp
        if o.op == "equal":
            s, e = p.ref.char_span(o.ref_start, o.ref_end)
            assert normalise(ref[s:e]).split() == p.ref.words[o.ref_start : o.ref_end]


def test_counts_match_wer_counts() -> None:
    ref, hyp = "She has no history of asthma or COPD", "she has history of as ma or copd and diabetes"
    p = align(ref, hyp)
    e = asr_errors(ref, hyp)
    assert (p.substitutions, p.deletions, p.insertions, p.hits) == (e.sub, e.dele, e.ins, e.hits)


def test_index_maps_and_tokens_in() -> None:
    p = align("no fever or chills", "fever or chills")
    assert p.hyp_index_for_ref(0) == 0  # deleted "no": insertion point
    assert p.hyp_index_for_ref(1) == 0
    assert p.hyp_index_for_ref(4) == 3
    assert p.ref_index_for_hyp(0) == 1
    s = p.ref.original.index("fever")
    assert p.ref.tokens_in(s, s + 5) == (1, 2)
    assert p.ref.tokens_in(s + 2, s + 3) == (1, 2)
    assert p.ref.tokens_in(2, 3) == (1, 1)  # the space between "no" and "fever"


def test_empty_texts() -> None:
    p = align("", "metformin")
    assert [o.op for o in p.ops] == ["ins"]
    assert p.ref_quote(0, 0) == ""
    assert align("", "").ops == ()


def test_out_of_range_quote_raises() -> None:
    tt = tokenize("no fever")
    with pytest.raises(MetricError, match=r"outside 0\.\.2"):
        tt.quote(1, 5)


def test_aci_bench_spans_read_as_their_tokens() -> None:
    """On real transcripts almost every token's own span normalises to contain it.

    The exceptions are context-dependent expansions (``it's been`` -> ``it has
    been``: the span ``it's`` alone normalises to ``it is``), still quoted right.
    """
    root = Path(__file__).resolve().parents[2]
    d = root / ".." / "shared" / "corpora" / "aci-bench" / "src_experiment_data"
    if not d.is_dir():
        pytest.skip(f"ACI-BENCH ASR pairs not found at {d}")
    csv.field_size_limit(1 << 30)
    tot = bad = 0
    for name in ("test1_virtscribe_asr.csv", "test1_virtscribe_humantrans.csv"):
        with (d / name).open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                tt = tokenize(row["dialogue"])
                assert tt.words == normalise(row["dialogue"]).split()
                for t in tt.tokens:
                    tot += 1
                    bad += t.text not in normalise(tt.original[t.start : t.end]).split()
    assert tot > 10_000
    assert bad / tot < 0.002, f"{bad} of {tot} token spans do not read as their token"


def test_range_projection() -> None:
    p = align("a b c d e g h", "a x c e g h f")  # b->x substituted, d deleted, f inserted at the end
    assert [o.op for o in p.ops] == ["equal", "sub", "equal", "del", "equal", "ins"]
    assert p.hyp_range_for_ref(0, 3) == (0, 3)  # a b c -> a x c
    assert p.hyp_range_for_ref(3, 4) == (3, 3)  # d deleted: insertion point before e
    assert p.hyp_range_for_ref(2, 5) == (2, 4)  # c d e -> c e
    assert p.hyp_range_for_ref(5, 7) == (4, 6)  # g h -> g h (f, inserted after, is not included)
    assert p.ref_range_for_hyp(4, 7) == (5, 7)  # g h f -> g h
    assert p.ref_range_for_hyp(6, 7) == (7, 7)  # f inserted at the end
    assert p.hyp_range_for_ref(1, 1) == (1, 1)
