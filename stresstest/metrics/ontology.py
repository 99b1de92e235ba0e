"""Ontology grounding for the inference-aware hallucination judge (retrieved, deterministic, hashed).

For one record and its transcript, :func:`grounding` retrieves the reference facts the judge is shown
under CLINICAL KNOWLEDGE, one line each, from four sources:

1. **trade / generic equivalence** — a drug named in a claim and a drug named in the transcript that
   the drug dictionary (:mod:`stresstest.clinical.drugs`) resolves to the same generic;
2. **synonyms** — a lexicon concept (:mod:`stresstest.clinical.lexicon`) that a claim and the
   transcript both mention under different surface forms ("dyspnoea" / "short of breath");
3. **abstraction of findings** and **sound clinical inference** — rows of ``prompts/ontology_v1.tsv``
   whose note term occurs in a claim while at least one of its cues occurs in the transcript;
4. **warning signs** for triage claims — red-flag lexicon concepts the transcript mentions, with the
   triage level they suggest.

Lines are de-duplicated and sorted by source, then text, and capped at :data:`MAX_LINES`, so the same
inputs always give the same block (it is part of the prompt and of its cache key). The
**ontology hash** covers ``ontology_<version>.tsv`` and every shipped clinical vocabulary file plus
the drug dictionary's package version: any change to what can be retrieved changes the hash recorded
in the manifest and the cache keys.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata, resources

from stresstest.clinical.text import norm_phrase
from stresstest.errors import MetricError
from stresstest.metrics.statements import Statement

MAX_LINES = 24
ONTOLOGY_PACKAGE = "stresstest.metrics.prompts"


@dataclass(frozen=True)
class OntologyRow:
    """One abstraction / inference relation."""

    relation: str
    term: str
    cues: tuple[str, ...]


@functools.lru_cache(maxsize=8)
def _file_text(version: str) -> str:
    path = resources.files(ONTOLOGY_PACKAGE) / f"ontology_{version}.tsv"
    if not path.is_file():
        raise MetricError(f"ontology file {ONTOLOGY_PACKAGE}/ontology_{version}.tsv not found")
    return path.read_text("utf-8")


@functools.lru_cache(maxsize=8)
def ontology_rows(version: str = "v1") -> tuple[OntologyRow, ...]:
    """The relations of ``ontology_<version>.tsv``, terms and cues normalised like the lexicon.

    Raises:
        MetricError: the file is missing or a row is malformed (naming the line).
    """
    rows = []
    for n, line in enumerate(_file_text(version).splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in line.split("\t")]
        if len(cells) != 3 or cells[0] not in ("abstraction", "inference") or not cells[1] or not cells[2]:
            raise MetricError(
                f"ontology_{version}.tsv:{n}: expected 'abstraction|inference<TAB>term<TAB>cue|cue...', got {line!r}"
            )
        cues = tuple(c for c in (norm_phrase(x) for x in cells[2].split("|")) if c)
        rows.append(OntologyRow(cells[0], norm_phrase(cells[1]), cues))
    return tuple(rows)


@functools.lru_cache(maxsize=8)
def ontology_hash(version: str = "v1") -> str:
    """sha256 over the ontology file, the clinical vocabulary files and the drug dictionary version."""
    h = hashlib.sha256()
    h.update(_file_text(version).encode("utf-8"))
    data = resources.files("stresstest.clinical") / "data"
    entries = [p for p in data.iterdir() if p.name.endswith(".tsv")] if data.is_dir() else []
    for entry in sorted(entries, key=lambda p: p.name):
        h.update(entry.name.encode())
        h.update(entry.read_bytes())
    try:
        h.update(metadata.version("drug-named-entity-recognition").encode())
    except metadata.PackageNotFoundError:
        h.update(b"no-drug-dictionary")
    return h.hexdigest()


def _has(text_norm: str, phrase: str) -> bool:
    return bool(phrase) and f" {phrase} " in f" {text_norm} "


def grounding(statements: Sequence[Statement], transcript: str, version: str = "v1") -> list[str]:
    """CLINICAL KNOWLEDGE lines for these record statements and this transcript (module docstring)."""
    from stresstest.clinical.drugs import find_drugs
    from stresstest.clinical.lexicon import find_mentions

    lines: set[tuple[int, str]] = set()
    t_norm = norm_phrase(transcript)
    t_drugs: dict[str, set[str]] = {}
    for m in find_drugs(transcript):
        t_drugs.setdefault(m.concept, set()).add(m.surface.lower())
    t_concepts: dict[str, set[str]] = {}
    red: dict[str, tuple[str, str | None]] = {}
    for m in find_mentions(transcript):
        t_concepts.setdefault(m.concept, set()).add(m.surface.lower())
        if m.red_flag:
            red.setdefault(m.concept, (m.surface.lower(), m.triage_hint))
    rows = ontology_rows(version)
    for s in statements:
        body = s.text.split(":", 1)[-1]
        for m in find_drugs(body):
            for surface in sorted(t_drugs.get(m.concept, set()) - {m.surface.lower()}):
                lines.add(
                    (
                        0,
                        f"'{m.surface}' (note) and '{surface}' (transcript) are the same drug, generic "
                        f"{m.concept}; trade and generic names are equivalent.",
                    )
                )
        for m in find_mentions(body):
            for surface in sorted(t_concepts.get(m.concept, set()) - {m.surface.lower()}):
                lines.add((1, f"'{m.surface}' (note) and '{surface}' (transcript) name the same concept: {m.concept}."))
        s_norm = norm_phrase(body)
        for row in rows:
            if not _has(s_norm, row.term):
                continue
            cues = [c for c in row.cues if _has(t_norm, c)]
            if not cues:
                continue
            said = ", ".join(f"'{c}'" for c in cues[:3])
            if row.relation == "abstraction":
                lines.add((2, f"'{row.term}' is a standard clinical term for what was said: {said}."))
            else:
                lines.add((3, f"'{row.term}' can be a sound working diagnosis when the picture includes {said}."))
        if s.field == "triage":
            for concept, (surface, hint) in sorted(red.items()):
                level = f"; suggests at least {hint} triage" if hint else ""
                lines.add((4, f"'{surface}' (transcript) is a warning sign ({concept}){level}."))
    return [text for _, text in sorted(lines)][:MAX_LINES]
