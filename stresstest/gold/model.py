"""Gold reference format (docs/spec.md §5): one YAML file per encounter.

A gold record holds, for ONE encounter and from its clean *human* transcript,
the gold triage label, the atomic claims and the gold safety flags, in exactly
the claim / flag models of the output schema S
(:mod:`stresstest.schema`), so gold and predictions compare field by
field. ``field_evidence`` maps a claim / flag id (or ``"triage"``) to verbatim
quotes from the human transcript; ``provenance`` says who drafted the record
and whether a clinician audited it.

``scope_turns`` exists because a run may hear only the first N turns of a long
dialogue: when it is set, the claims cover only those turns and the runner
truncates the encounter to the same N turns before rendering audio.

Files are read with ``yaml.safe_load`` only; errors name the file and the key
path (pydantic's ``loc``), e.g. ``claims[3].status``.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from stresstest.cache import atomic_write_text
from stresstest.errors import GoldError
from stresstest.schema import Claim, SafetyFlag, Triage

GOLD_SCHEMA_VERSION = 1
GOLD_SUFFIXES: tuple[str, ...] = (".yaml", ".yml")


class Provenance(BaseModel):
    """How a gold record was made and whether a clinician signed it off."""

    model_config = ConfigDict(extra="forbid")

    drafted_by: str = Field(description="Who or what drafted it, e.g. 'llm:qwen3-32b' or a person/method.")
    audited_by: str | None = Field(default=None, description="The auditing clinician, once audited.")
    audited: bool = Field(default=False, description="True only after a clinician reviewed every field.")
    date: str = Field(description="ISO date (YYYY-MM-DD) of the last change (draft or audit).")
    notes: str = Field(default="", description="Free text: caveats, what was left out, disagreements.")


class GoldRecord(BaseModel):
    """The gold reference for one encounter."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    encounter_id: str = Field(description="Id of the encounter, equal to the file name's stem.")
    corpus: str = Field(description="Corpus the encounter comes from: osce, primock57, ...")
    scope_turns: int | None = Field(
        default=None,
        ge=1,
        description="When set, the claims cover only the first N turns and runs truncate to N turns.",
    )
    chief_complaint: str | None = None
    triage: Triage = Field(description="Gold triage level with a one-sentence rationale.")
    claims: list[Claim] = Field(default_factory=list)
    safety_flags: list[SafetyFlag] = Field(default_factory=list)
    field_evidence: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Field id ('triage', a claim or flag id) -> verbatim quotes from the human transcript.",
    )
    provenance: Provenance


def _loc(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic ``loc`` as a key path: ``claims[3].status``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<top level>"


def validation_messages(err: ValidationError) -> list[str]:
    """One ``key.path: message (got ...)`` line per pydantic error."""
    lines = []
    for e in err.errors():
        got = e.get("input")
        shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
        lines.append(f"{_loc(tuple(e['loc']))}: {e['msg']}{shown}")
    return lines


def parse_gold(data: Any, where: str) -> GoldRecord:
    """Validate a loaded YAML mapping as a :class:`GoldRecord`.

    Args:
        data: what ``yaml.safe_load`` returned.
        where: file name for messages.

    Raises:
        GoldError: naming ``where`` and every invalid key path.
    """
    if not isinstance(data, Mapping):
        raise GoldError(f"{where}: expected a YAML mapping at the top level, got {type(data).__name__}")
    try:
        return GoldRecord.model_validate(dict(data))
    except ValidationError as err:
        msgs = validation_messages(err)
        raise GoldError(f"{where}: invalid gold record: " + "; ".join(msgs)) from None


def read_gold_file(path: str | Path) -> GoldRecord:
    """Load and validate ONE gold file; the file stem must equal ``encounter_id``.

    Raises:
        GoldError: the file is missing, is not YAML, or does not validate.
    """
    p = Path(path)
    from stresstest.paths import input_problem

    problem = input_problem(p, "a gold YAML file")  # a FIFO would block the read; a loop is not "not found"
    if problem is not None:
        raise GoldError(problem)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GoldError(f"{p}: gold file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise GoldError(f"{p}: cannot read gold file as UTF-8 text: {err}") from None
    from stresstest.errors import ConfigError
    from stresstest.yamlcfg import load_yaml_bounded

    try:
        # The bounded safe loader: alias bombs, duplicate keys and oversized files are one-line errors.
        data, _ = load_yaml_bounded(text, str(p))
    except ConfigError as err:
        raise GoldError(str(err)) from None
    rec = parse_gold(data, str(p))
    if p.stem != rec.encounter_id:
        # One file per encounter, named after it: otherwise an edit to the wrong file goes unnoticed.
        raise GoldError(
            f"{p}: encounter_id {rec.encounter_id!r} does not match the file name (expected "
            f"{p.stem!r}); rename the file to {rec.encounter_id}.yaml"
        )
    return rec


def gold_files(path: str | Path) -> list[Path]:
    """The gold files under a directory (sorted), or the one file given."""
    from stresstest.paths import input_problem

    p = Path(path)
    if p.is_dir():
        # Every entry with a gold suffix: a FIFO, a dangling link or a loop is an error naming it, not skipped.
        return sorted(f for f in p.iterdir() if f.suffix in GOLD_SUFFIXES)
    if not p.exists() and not p.is_symlink():
        raise GoldError(f"{p}: no such gold file or directory")
    problem = input_problem(p, "a gold YAML file or a folder of them")
    if problem is not None:
        raise GoldError(problem)
    return [p]


def load_gold(path_or_dir: str | Path) -> dict[str, GoldRecord]:
    """Load one gold file or every ``*.yaml`` / ``*.yml`` file of a directory.

    Args:
        path_or_dir: a gold file, or a directory holding one file per encounter.

    Returns:
        ``{encounter_id: GoldRecord}`` in sorted file order.

    Raises:
        GoldError: a file is invalid (message names the file and key path), or two
            files claim the same encounter id.
    """
    out: dict[str, GoldRecord] = {}
    where: dict[str, Path] = {}
    for f in gold_files(path_or_dir):
        rec = read_gold_file(f)
        if rec.encounter_id in out:
            raise GoldError(f"{f}: encounter_id {rec.encounter_id!r} is already defined in {where[rec.encounter_id]}")
        out[rec.encounter_id] = rec
        where[rec.encounter_id] = f
    return out


def default_gold_dir() -> Path:
    """The gold set shipped with the package (``stresstest/gold/data``)."""
    return Path(__file__).parent / "data"


def _drop_none(obj: Any) -> Any:
    # Unset optional fields (value/unit/time/laterality) are left out of the file so a
    # clinician reads only what the record says; loading puts the None defaults back.
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None or k in _KEEP_NONE}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


# Top-level / provenance keys that stay visible even when empty, so the auditor sees the slot.
_KEEP_NONE = frozenset({"scope_turns", "chief_complaint", "audited_by"})


class _Flow(dict):  # type: ignore[type-arg]
    """A mapping or list written on one line: one claim / flag / quote list per line reads like a table."""


class _FlowList(list):  # type: ignore[type-arg]
    pass


class _Quote(str):
    """A transcript quote: always double-quoted, so apostrophes and colons need no escaping by hand."""

    __slots__ = ()


class _GoldDumper(yaml.SafeDumper):
    pass


_GoldDumper.add_representer(
    _Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=True)
)
_GoldDumper.add_representer(_Quote, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", str(v), style='"'))
_GoldDumper.add_representer(_FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def dump_gold(record: GoldRecord) -> str:
    """The YAML text of a gold record: field order of the model, one claim / flag per line."""
    data = _drop_none(record.model_dump(mode="json"))
    data["claims"] = [_Flow(c) for c in data["claims"]]
    data["safety_flags"] = [_Flow(f) for f in data["safety_flags"]]
    data["field_evidence"] = {k: _FlowList(_Quote(q) for q in v) for k, v in data["field_evidence"].items()}
    # No wrapping: a quote broken over lines with a trailing backslash is easy to damage by hand.
    return yaml.dump(
        data, Dumper=_GoldDumper, sort_keys=False, allow_unicode=True, width=4096, default_flow_style=False
    )


def _is_audited_file(p: Path) -> bool:
    try:
        from stresstest.errors import ConfigError
        from stresstest.yamlcfg import load_yaml_bounded

        data, _ = load_yaml_bounded(p.read_text(encoding="utf-8"), str(p))
    except (OSError, UnicodeDecodeError, ConfigError):
        return False
    prov = data.get("provenance") if isinstance(data, Mapping) else None
    return bool(isinstance(prov, Mapping) and prov.get("audited") is True)


def save_gold(record: GoldRecord, path: str | Path, overwrite_audited: bool = False) -> Path:
    """Write a gold record as YAML (atomically).

    Args:
        record: the record to write.
        path: a file path, or a directory (the file is then ``<encounter_id>.yaml``).
        overwrite_audited: allow replacing a file a clinician already marked audited.

    Returns:
        The path written.

    Raises:
        GoldError: the target is an audited gold file and ``overwrite_audited`` is False.
    """
    p = Path(path)
    if p.is_dir():
        p = p / f"{record.encounter_id}.yaml"
    if p.exists() and not overwrite_audited and _is_audited_file(p):
        raise GoldError(
            f"{p}: refusing to overwrite a clinician-audited gold file "
            "(provenance.audited is true); write elsewhere or pass overwrite_audited"
        )
    os.makedirs(p.parent, exist_ok=True)
    atomic_write_text(p, dump_gold(record))
    return p


def today() -> str:
    """Today's date as ISO ``YYYY-MM-DD`` (UTC, so the same run gives the same date everywhere)."""
    return _dt.datetime.now(_dt.timezone.utc).date().isoformat()
