"""The condition grid: which (family, SNR, mitigation) conditions a run evaluates.

A :class:`Condition` is a small frozen recipe (lhotse's ``MixTrack`` is the model):
what the condition is, written to the manifest and read back by the report. Rules:

* ``clean`` is the clean-ASR reference; it has family ``clean`` and no SNR.
* A noisy condition is one family at one SNR: id ``<family>_<snr:g>db``
  (``ambient_15db``, ``babble_7.5db``).
* A chain condition (:mod:`stresstest.noise.chain`) is clean speech through a named list of
  transforms (room, noise, channel, level): family ``chain``, no SNR of its own, id = its config name.
* A mitigated condition re-structures the transcripts of a noisy condition (its
  ``base``) with the evidence-grounded guard: id ``<base>_guard``. It has no
  audio or transcript of its own; everything acoustic comes from ``base``.

The grid is ordered: clean first, then each family × SNR in config order, then
the chain conditions in config order, then the mitigated rows. Code asks the grid (:meth:`ConditionGrid.noisy`,
:meth:`ConditionGrid.mitigated`, :meth:`ConditionGrid.base_of`) instead of
parsing condition ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

CLEAN = "clean"
CHAIN = "chain"
GUARD_SUFFIX = "_guard"


def condition_id(family: str, snr_db: float) -> str:
    """'ambient_15db', 'babble_7.5db'."""
    return f"{family}_{snr_db:g}db"


class Condition(BaseModel):
    """One condition of the grid (frozen; serialised with the key ``condition`` for the id).

    Attributes:
        id: stable condition id (``clean``, ``ambient_15db``, ``ambient_5db_guard``).
        family: ``clean`` or the noise family (``ambient``, ``babble``).
        snr_db: target SNR in dB; None for clean.
        mitigated: True for a guard row.
        base: the condition whose audio and transcripts this one uses (itself
            unless mitigated).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(
        validation_alias=AliasChoices("condition", "id"),
        serialization_alias="condition",
        description="Stable condition id (the key 'condition' on disk).",
    )
    family: str = Field(description="'clean' or the noise family.")
    snr_db: float | None = Field(default=None, description="Target SNR in dB (None for clean).")
    mitigated: bool = Field(default=False, description="A guard row (re-structures its base's transcripts).")
    base: str = Field(default="", description="Condition whose audio/transcripts it uses (itself unless mitigated).")
    chain: list[dict[str, Any]] | None = Field(
        default=None, description="A chain condition's steps, each {kind: {params}} (None for the others)."
    )
    axes: dict[str, str] | None = Field(
        default=None, description="A chain condition expanded from `chains.axes`: the label it took on each axis."
    )

    @model_validator(mode="before")
    @classmethod
    def _default_base(cls, data: Any) -> Any:
        # Manifests written before `base` existed: derive it by the documented id rule.
        if isinstance(data, dict) and not data.get("base"):
            cid = data.get("condition", data.get("id"))
            if isinstance(cid, str):
                mitigated = bool(data.get("mitigated", False))
                data = {**data, "base": cid.removesuffix(GUARD_SUFFIX) if mitigated else cid}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Condition:
        if self.family == CLEAN and (self.snr_db is not None or self.mitigated):
            raise ValueError(f"condition {self.id!r}: the clean condition has no SNR and no mitigation")
        if not self.mitigated and self.base != self.id:
            raise ValueError(f"condition {self.id!r}: only a mitigated condition has another base ({self.base!r})")
        if (self.family == CHAIN) != (self.chain is not None) or (self.chain is not None and self.snr_db is not None):
            raise ValueError(f"condition {self.id!r}: family 'chain' goes with a chain of steps and no SNR of its own")
        return self

    def __hash__(self) -> int:  # the chain's dicts are not hashable; the id identifies a condition in a grid
        return hash((self.id, self.family, self.snr_db, self.mitigated, self.base))

    @classmethod
    def clean(cls) -> Condition:
        """The clean-ASR reference condition."""
        return cls(id=CLEAN, family=CLEAN, snr_db=None, mitigated=False, base=CLEAN)

    @classmethod
    def noisy(cls, family: str, snr_db: float) -> Condition:
        """One family at one SNR."""
        cid = condition_id(family, snr_db)
        return cls(id=cid, family=family, snr_db=float(snr_db), mitigated=False, base=cid)

    @classmethod
    def chained(cls, name: str, steps: list[dict[str, Any]], axes: dict[str, str] | None = None) -> Condition:
        """A chain condition: clean speech through ``steps`` (each ``{kind: {params}}``)."""
        return cls(id=name, family=CHAIN, snr_db=None, mitigated=False, base=name, chain=steps, axes=axes)

    @property
    def is_chain(self) -> bool:
        """True for a chain condition (its audio is built by :mod:`stresstest.noise.chain`)."""
        return self.chain is not None

    def guarded(self) -> Condition:
        """The mitigated (guard) condition built on this noisy one."""
        if self.is_clean or self.mitigated:
            raise ValueError(f"only a noisy, unmitigated condition can be guarded, not {self.id!r}")
        return Condition(
            id=self.id + GUARD_SUFFIX, family=self.family, snr_db=self.snr_db, mitigated=True, base=self.id
        )

    @property
    def is_clean(self) -> bool:
        """True for the clean-ASR reference row."""
        return self.id == CLEAN

    @property
    def has_audio(self) -> bool:
        """True when the condition has audio and a transcript of its own (not a guard row)."""
        return not self.mitigated

    def to_json(self) -> dict[str, Any]:
        """The manifest form: ``{condition, family, snr_db, mitigated, base}`` (+ ``chain``, ``axes`` when set)."""
        return self.model_dump(
            mode="json", by_alias=True, exclude={k for k in ("chain", "axes") if getattr(self, k) is None}
        )


class ConditionGrid(Sequence[Condition]):
    """An ordered, immutable list of conditions with the questions the stages ask of it."""

    def __init__(self, conditions: Iterable[Condition]) -> None:
        self._items = tuple(conditions)
        self._by_id = {c.id: c for c in self._items}
        if len(self._by_id) != len(self._items):
            dup = sorted({c.id for c in self._items if sum(1 for d in self._items if d.id == c.id) > 1})
            raise ValueError(f"condition ids must be unique, got duplicates {dup}")
        for c in self._items:
            if c.base not in self._by_id:
                raise ValueError(f"condition {c.id!r}: its base {c.base!r} is not in the grid")

    @classmethod
    def build(
        cls,
        families: Iterable[str],
        snrs_db: Iterable[float],
        guarded: Iterable[str] = (),
        chains: Iterable[Condition] = (),
    ) -> ConditionGrid:
        """Clean, each family × SNR, the chain conditions, then the guard rows of the named noisy conditions."""
        snrs = list(snrs_db)
        conds = [Condition.clean()] + [Condition.noisy(f, s) for f in families for s in snrs] + list(chains)
        by_id = {c.id: c for c in conds}
        for g in guarded:
            if g not in by_id or by_id[g].is_clean:
                raise ValueError(f"mitigation condition {g!r} is not in the grid {sorted(set(by_id) - {CLEAN})}")
            conds.append(by_id[g].guarded())
        return cls(conds)

    @classmethod
    def from_json(cls, rows: Iterable[dict[str, Any]]) -> ConditionGrid:
        """Read back the manifest form (see :meth:`Condition.to_json`)."""
        return cls(Condition.model_validate(r) for r in rows)

    def __getitem__(self, i: int) -> Condition:  # type: ignore[override]
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Condition]:
        return iter(self._items)

    def __contains__(self, cid: object) -> bool:
        if isinstance(cid, Condition):
            return cid.id in self._by_id
        return cid in self._by_id

    def __repr__(self) -> str:
        return f"ConditionGrid({[c.id for c in self._items]})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConditionGrid) and self._items == other._items

    def __hash__(self) -> int:
        return hash(self._items)

    @property
    def ids(self) -> list[str]:
        """Condition ids in grid order."""
        return [c.id for c in self._items]

    def get(self, cid: str) -> Condition:
        """The condition with id ``cid``.

        Raises:
            KeyError: naming the id and the grid.
        """
        try:
            return self._by_id[cid]
        except KeyError:
            raise KeyError(f"condition {cid!r} is not in the grid {self.ids}") from None

    def base_of(self, cid: str) -> str:
        """Id of the condition whose audio/transcripts ``cid`` uses (``cid`` itself unless mitigated)."""
        return self.get(cid).base

    def noisy(self) -> list[Condition]:
        """Noisy, unmitigated conditions (the ones that need a mixture)."""
        return [c for c in self._items if not c.is_clean and not c.mitigated]

    def chained(self) -> list[Condition]:
        """Chain conditions (their audio comes from :mod:`stresstest.noise.chain`, not the family mixer)."""
        return [c for c in self._items if c.is_chain]

    def probe_twin(self, cid: str) -> Condition | None:
        """The baseline of a silence-probe condition: the chain condition of the grid whose steps are ``cid``'s
        without its first (``silence``) step (None: ``cid`` has no such step, or the grid has no twin)."""
        chain = self.get(cid).chain or []
        if not chain or "silence" not in chain[0]:
            return None
        return next((c for c in self.chained() if not c.mitigated and c.chain == chain[1:]), None)

    def mitigated(self) -> list[Condition]:
        """Guard rows."""
        return [c for c in self._items if c.mitigated]

    def with_audio(self) -> list[Condition]:
        """Conditions that have audio and a transcript of their own (clean + noisy)."""
        return [c for c in self._items if c.has_audio]

    def families(self) -> list[str]:
        """Noise families in grid order (without 'clean')."""
        return list(dict.fromkeys(c.family for c in self._items if not c.is_clean))

    def dependents(self, cid: str) -> list[Condition]:
        """Conditions that use ``cid``'s audio/transcript (itself and its guard rows)."""
        return [c for c in self._items if c.base == cid]

    def to_json(self) -> list[dict[str, Any]]:
        """The manifest form, in grid order."""
        return [c.to_json() for c in self._items]
