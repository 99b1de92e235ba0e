"""Corpus loaders: clinical dialogue corpora -> :class:`~stresstest.records.Encounter` records.

``load_corpus(kind, path)`` is the one entry point the runner uses. Every loader
returns clean turn texts (tags resolved, punctuation and whitespace normalised),
so that ``Encounter.reference_text()`` (turn texts joined by one space) is the
whole reference-transcript rule. Per-corpus details: ``docs/corpora.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from stresstest.corpus.acibench import load_acibench
from stresstest.corpus.manifest import load_manifest
from stresstest.corpus.osce import load_osce
from stresstest.corpus.primock57 import load_primock57
from stresstest.errors import CorpusError
from stresstest.records import Encounter

_LOADERS: dict[str, Callable[[str | Path], list[Encounter]]] = {
    "osce": load_osce,
    "primock57": load_primock57,
    "aci-bench": load_acibench,
    "manifest": load_manifest,
}
CORPUS_KINDS: tuple[str, ...] = tuple(_LOADERS)

__all__ = [
    "CORPUS_KINDS",
    "load_acibench",
    "load_corpus",
    "load_manifest",
    "load_osce",
    "load_primock57",
]


def load_corpus(
    kind: str,
    path: str | Path,
    ids: list[str] | None = None,
    limit: int | None = None,
) -> list[Encounter]:
    """Load the encounters of a corpus, sorted by id.

    Args:
        kind: one of :data:`CORPUS_KINDS` (``osce``, ``primock57``, ``aci-bench``,
            ``manifest``).
        path: the corpus folder in its published layout (or a manifest file; for
            ACI-BENCH also a single CSV).
        ids: keep only these encounter ids (order does not matter; the result is
            still sorted by id).
        limit: keep the first ``limit`` encounters after sorting and selecting.

    Returns:
        Encounters sorted by ``encounter_id``.

    Raises:
        CorpusError: for an unknown kind, a missing or malformed corpus (naming file
            and line), an unknown id (listing some known ids) or a negative limit.
    """
    loader = _LOADERS.get(kind)
    if loader is None:
        raise CorpusError(f"unknown corpus kind {kind!r} (expected one of: {', '.join(CORPUS_KINDS)})")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise CorpusError(f"expected limit to be a whole number >= 0 or None, got {limit!r}")
    encounters = sorted(loader(path), key=lambda e: e.encounter_id)
    by_id = {e.encounter_id: e for e in encounters}
    if len(by_id) != len(encounters):  # loaders guarantee this; a clash would silently drop items
        counts: dict[str, int] = {}
        for e in encounters:
            counts[e.encounter_id] = counts.get(e.encounter_id, 0) + 1
        dup = next(i for i, n in counts.items() if n > 1)
        raise CorpusError(f"{path}: expected unique encounter ids in the {kind} corpus, got {dup!r} twice")
    if ids is not None:
        wanted = list(dict.fromkeys(ids))
        unknown = [i for i in wanted if i not in by_id]
        if unknown:
            known = ", ".join(list(by_id)[:5])
            raise CorpusError(
                f"{path}: unknown encounter id(s) {', '.join(map(repr, unknown[:5]))}"
                f"{' ...' if len(unknown) > 5 else ''} in the {kind} corpus "
                f"(known ids: {known}{', ...' if len(by_id) > 5 else ''}; {len(by_id)} in all)"
            )
        keep = set(wanted)
        encounters = [e for e in encounters if e.encounter_id in keep]
    return encounters if limit is None else encounters[:limit]
