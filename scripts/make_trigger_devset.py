"""Cut real ACI-BENCH ASR/human encounter pairs into utterance-level pairs for the trigger dev set.

For each encounter of ``test1``/``test2`` (virtscribe ASR vs human transcript; ACI ASR vs its human
correction), the two whole transcripts are aligned word by word (:func:`stresstest.metrics.align.align`),
the reference is cut into sentences inside speaker turns, each sentence is mapped to the hypothesis
stretch aligned to it, and the pairs whose normalised words differ are kept. A seeded sample (patient
turns first, as in primary-care error studies; ``--all`` appends every other differing pair) is written as
JSON lines WITHOUT labels; labels were added by hand following ``docs/trigger_labelling.md`` and the split by
encounter fixed before tuning: the result is ``data/trigger_devset/pairs.jsonl`` (see its README).

``--run DIR`` cuts the same way the items of a stresstest run over OSCE or PriMock57 encounters (the project's
TTS -> noise -> ASR: another ASR, another corpus): each item's reference text, speakers taken from the transcript
(``--corpus-kind``, ``--corpus``), against its ASR transcript. Sentences under 3 words (a bare "No.") are joined
to the sentence before them instead of dropped, so a lost short answer is judged with its question. ``--n``
pairs are drawn with an equal share per condition (``--conditions``: only these; identical reference/hypothesis
texts once) and each encounter is assigned ``dev``/``test`` by a seeded shuffle (``--split-seed``) at cutting
time, before labelling: ``data/trigger_devset_osce/pairs.jsonl``, ``data/trigger_devset_primock/pairs.jsonl``.

Usage::

    python scripts/make_trigger_devset.py --out /tmp/unlabelled.jsonl [--n 300] [--seed 10] [--all]
    python scripts/make_trigger_devset.py --run RUN_DIR --out /tmp/osce.jsonl [--n 300] [--seed 10] [--split-seed 0]
    python scripts/make_trigger_devset.py --run RUN_DIR --corpus-kind primock57 --corpus ../shared/corpora/primock57 \
        --conditions ambient0,babble10 --prefix m --out /tmp/primock.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from validate_triggers import load_pairs  # scripts/ is on sys.path when this runs as a script

from stresstest.corpus import load_corpus
from stresstest.corpus.osce import parse_osce_file
from stresstest.errors import CorpusError
from stresstest.metrics.align import AlignedPair, align
from stresstest.records import Encounter

_ROOT = Path(__file__).resolve().parents[1]
_REL = Path("shared") / "corpora" / "aci-bench" / "src_experiment_data"
# ../shared next to the checkout (main), or two levels up (a worktree under wt/).
DATA = next((p / _REL for p in (_ROOT.parent, _ROOT.parent.parent) if (p / _REL).is_dir()), _ROOT.parent / _REL)
_TURN = re.compile(r"\[(doctor|patient|patient_guest|doctor_guest|guest_family|guest_clinician)\]")
_SENT = re.compile(r"[^.?!\n]+[.?!]?")


def _tag_turns(ref: str) -> list[tuple[str, int, int]]:
    """(speaker, body start, body end) of each ``[speaker]``-tagged turn of an ACI-BENCH dialogue."""
    marks = [(m.end(), m.group(1)) for m in _TURN.finditer(ref)]
    return [
        (speaker, start, marks[k + 1][0] - len(marks[k + 1][1]) - 2 if k + 1 < len(marks) else len(ref))
        for k, (start, speaker) in enumerate(marks)
    ]


def _sentences(
    ref: str, turns: list[tuple[str, int, int]] | None = None, join_short: bool = False
) -> list[tuple[str, int, int]]:
    """(speaker, start, end) of each reference sentence of ≥ 3 words, inside speaker turns.

    ``turns`` gives the turns' (speaker, start, end) in ``ref`` (default: read off ACI-BENCH ``[speaker]`` tags).
    With ``join_short`` a sentence of fewer than 3 words ("No.", "Yes, I have.") is not dropped but joined to the
    sentence before it, across the turn boundary, so that a short answer is judged with the question it answers;
    the unit's speaker is then ``first+second`` ("doctor+patient") when the two differ.
    """
    out: list[tuple[str, int, int]] = []
    for speaker, body_start, body_end in _tag_turns(ref) if turns is None else turns:
        for s in _SENT.finditer(ref, body_start, body_end):
            a, b = s.start(), s.end()
            while a < b and ref[a].isspace():
                a += 1
            if len(ref[a:b].split()) >= 3:
                out.append((speaker, a, b))
            elif join_short and out and ref[a:b].strip():
                prev, pa, _ = out[-1]
                joined = prev if speaker in prev.split("+") else f"{prev}+{speaker}"
                out[-1] = (joined, pa, b)
    return out


_MAX_WORDS = 40
_HALF_WINDOW = 12


def _windows(pair: AlignedPair, i: int, j: int) -> list[tuple[int, int]]:
    """The sentence [i, j) itself, or for a long one, windows of ±12 words around each differing stretch."""
    if j - i <= _MAX_WORDS:
        return [(i, j)]
    out: list[tuple[int, int]] = []
    for o in pair.ops:
        inside = o.ref_start < j and o.ref_end > i if o.ref_end > o.ref_start else i < o.ref_start < j
        if o.op == "equal" or not inside:
            continue
        lo, hi = max(i, o.ref_start - _HALF_WINDOW), min(j, o.ref_end + _HALF_WINDOW)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def cut_pairs(
    ref: str, hyp: str, turns: list[tuple[str, int, int]] | None = None, join_short: bool = False
) -> list[dict[str, str]]:
    """The differing utterance pairs of one encounter pair: {speaker, reference, hypothesis} per reference
    sentence (or window of a long one) whose aligned hypothesis stretch differs after normalisation."""
    pair = align(ref, hyp)
    out: list[dict[str, str]] = []
    for speaker, a, b in _sentences(ref, turns, join_short):
        si, sj = pair.ref.tokens_in(a, b)
        for i, j in _windows(pair, si, sj):
            hi, hj = pair.hyp_range_for_ref(i, j)
            if j - i < 3 or pair.ref.words[i:j] == pair.hyp.words[hi:hj]:
                continue
            rs, re_ = pair.ref.char_span(i, j)
            hs, he = pair.hyp.char_span(hi, hj) if hj > hi else (0, 0)
            out.append(
                {
                    "speaker": speaker,
                    "reference": _TURN.sub("", ref[rs:re_]).strip(),
                    "hypothesis": _TURN.sub("", hyp[hs:he]).strip(),
                }
            )
    return out


def utterance_pairs() -> list[dict[str, object]]:
    """Every differing sentence-level pair of the four ACI-BENCH test files (read by
    :func:`validate_triggers.load_pairs`, the one ACI-BENCH reader)."""
    out: list[dict[str, object]] = []
    for source, eid, ref, hyp in load_pairs(DATA):
        for p in cut_pairs(ref, hyp):
            # "test1_aci_asr" -> "test1_aci"
            out.append({"source": source.rsplit("_", 1)[0], "encounter_id": eid, **p})
    return out


def _turn_spans(enc: Encounter, reference: str, where: str) -> list[tuple[str, int, int]]:
    """(speaker, start, end) of the encounter's first turns inside ``reference`` (an item's reference_text:
    the turns joined by one space, :meth:`Encounter.reference_text`, possibly truncated to fewer turns)."""
    spans: list[tuple[str, int, int]] = []
    pos = 0
    for turn in enc.turns:
        if pos >= len(reference):
            break
        text = " ".join(turn.text.split())
        if not reference.startswith(text, pos):
            raise SystemExit(
                f"{where}: reference_text does not continue with turn {len(spans) + 1} of "
                f"{enc.source_path}: expected {text[:60]!r} at character {pos}"
            )
        spans.append((turn.speaker, pos, pos + len(text)))
        pos += len(text) + 1
    if pos < len(reference):
        raise SystemExit(f"{where}: reference_text is longer than the turns of {enc.source_path}")
    return spans


class _Transcripts:
    """The reference transcripts of a run's encounters, by id: an OSCE ``<id>.txt`` file each (read on demand),
    or any other corpus kind :func:`stresstest.corpus.load_corpus` reads (the folder loaded once)."""

    def __init__(self, kind: str, corpus_dir: Path) -> None:
        self.kind, self.corpus_dir = kind, corpus_dir
        self._by_id: dict[str, Encounter] = {}
        self._loaded = False

    def get(self, eid: str, where: str) -> Encounter:
        if eid in self._by_id:
            return self._by_id[eid]
        if self.kind == "osce":
            path = self.corpus_dir / f"{eid}.txt"
            if not path.is_file():
                raise SystemExit(f"{where}: transcript of {eid} not found: expected {path}")
            self._by_id[eid] = parse_osce_file(path)
        elif not self._loaded:
            try:
                self._by_id = {e.encounter_id: e for e in load_corpus(self.kind, self.corpus_dir)}
            except CorpusError as exc:
                raise SystemExit(f"error: --corpus {self.corpus_dir} ({self.kind}): {exc}") from None
            self._loaded = True
        if eid not in self._by_id:
            raise SystemExit(f"{where}: transcript of {eid} not found in the {self.kind} corpus {self.corpus_dir}")
        return self._by_id[eid]


def run_utterance_pairs(run_dir: Path, corpus_dir: Path, kind: str = "osce") -> list[dict[str, object]]:
    """Every differing pair of a stresstest run over ``kind`` encounters (``osce``, ``primock57``): each
    (non-mitigated) item's reference text (speakers from the transcripts in ``corpus_dir``) against its ASR
    transcript; short answers are joined to the sentence before them (:func:`_sentences`). ``source`` is the
    item's condition."""
    items_path = run_dir / "items.jsonl"
    if not items_path.is_file():
        raise SystemExit(f"error: {items_path} not found (expected a stresstest run directory)")
    out: list[dict[str, object]] = []
    transcripts = _Transcripts(kind, corpus_dir)
    for n, line in enumerate(items_path.read_text(encoding="utf-8").splitlines(), 1):
        item = json.loads(line)
        where = f"{items_path}:{n}"
        if item.get("mitigated") or item.get("failed"):
            continue
        try:
            eid, ref, hyp, cond = (
                str(item[k]) for k in ("encounter_id", "reference_text", "hypothesis_text", "condition")
            )
        except KeyError as exc:
            raise SystemExit(f"{where}: expected key {exc.args[0]!r} in the item") from None
        turns = _turn_spans(transcripts.get(eid, where), ref, where)
        for p in cut_pairs(ref, hyp, turns, join_short=True):
            out.append({"source": cond, "encounter_id": eid, **p})
    return out


def sample_run_pairs(pairs: list[dict[str, object]], n: int, seed: int, split_seed: int) -> list[dict[str, object]]:
    """Seeded sample of ``n`` pairs, an equal share per condition (distinct reference/hypothesis texts only,
    first condition wins), in (encounter, condition) order, each with its encounter's split: the sorted
    encounter ids shuffled with ``split_seed``, the first half ``dev``, the rest ``test``."""
    seen: set[tuple[str, str]] = set()
    by_cond: dict[str, list[dict[str, object]]] = {}
    for p in pairs:
        key = (str(p["reference"]), str(p["hypothesis"]))
        if key not in seen:
            seen.add(key)
            by_cond.setdefault(str(p["source"]), []).append(p)
    rng = random.Random(seed)
    share = n // max(1, len(by_cond))
    sample = [p for c in sorted(by_cond) for p in rng.sample(by_cond[c], min(share, len(by_cond[c])))]
    order = {c: k for k, c in enumerate(sorted(by_cond))}
    sample.sort(key=lambda p: (str(p["encounter_id"]), order[str(p["source"])]))
    ids = sorted({str(p["encounter_id"]) for p in pairs})
    random.Random(split_seed).shuffle(ids)
    dev = set(ids[: len(ids) // 2])
    return [{**p, "split": "dev" if p["encounter_id"] in dev else "test"} for p in sample]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--all", action="store_true", help="append every other differing pair after the sample")
    ap.add_argument(
        "--run",
        type=Path,
        default=None,
        help="a stresstest run directory over OSCE or PriMock57 encounters instead of ACI-BENCH (TTS -> ASR pairs)",
    )
    ap.add_argument(
        "--corpus-kind",
        choices=("osce", "primock57"),
        default="osce",
        help="--run: the corpus the run's encounters come from",
    )
    ap.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="--run: the transcripts (speakers of the reference turns): the OSCE transcripts folder "
        "(default data/osce/transcripts) or the PriMock57 folder (required for primock57)",
    )
    ap.add_argument(
        "--conditions",
        default=None,
        help="--run: comma-separated conditions to draw from (default: every condition of the run)",
    )
    ap.add_argument("--prefix", default="o", help="--run: pair_id prefix (o: OSCE set, m: PriMock57 set)")
    ap.add_argument("--split-seed", type=int, default=0, help="--run: seed of the dev/test shuffle of encounters")
    args = ap.parse_args(argv)
    if args.run is not None:
        if args.corpus is None and args.corpus_kind != "osce":
            ap.error(f"--corpus-kind {args.corpus_kind} needs --corpus (the corpus folder)")
        corpus = args.corpus or _ROOT / "data" / "osce" / "transcripts"
        pairs = run_utterance_pairs(args.run, corpus, args.corpus_kind)
        if args.conditions is not None:
            keep = [c.strip() for c in args.conditions.split(",") if c.strip()]
            have = sorted({str(p["source"]) for p in pairs})
            unknown = sorted(set(keep) - set(have))
            if unknown or not keep:
                ap.error(f"--conditions: {unknown or keep} not among the run's differing conditions {have}")
            pairs = [p for p in pairs if p["source"] in keep]
        sample = sample_run_pairs(pairs, args.n, args.seed, args.split_seed)
        _write(args.out, sample, args.prefix)
        print(f"{len(pairs)} differing utterance pairs in {args.run}; wrote {len(sample)} to {args.out}")
        return 0
    pairs = utterance_pairs()
    rng = random.Random(args.seed)
    patient = [p for p in pairs if str(p["speaker"]).startswith("patient")]
    other = [p for p in pairs if not str(p["speaker"]).startswith("patient")]
    n_pat = min(len(patient), args.n)
    sample = rng.sample(patient, n_pat) + rng.sample(other, min(len(other), args.n - n_pat))
    sample.sort(key=lambda p: (str(p["source"]), str(p["encounter_id"])))
    if args.all:
        # The first --n pairs keep their ids; every remaining differing pair follows (labelled second).
        chosen = {id(p) for p in sample}
        sample += sorted(
            (p for p in pairs if id(p) not in chosen), key=lambda p: (str(p["source"]), str(p["encounter_id"]))
        )
    _write(args.out, sample, "p")
    print(f"{len(pairs)} differing sentence pairs ({len(patient)} patient); wrote {len(sample)} to {args.out}")
    return 0


def _write(out: Path, sample: list[dict[str, object]], prefix: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for k, p in enumerate(sample):
            fh.write(json.dumps({"pair_id": f"{prefix}{k:03d}", **p}) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
