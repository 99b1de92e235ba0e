"""Every section reference in the package ("docs/spec.md §6") names a section of ``docs/spec.md`` (issue 38).

The spec the code cites lives in the repository; a reference to a section that does not exist, or to a spec
outside the repository, fails here with the file and line. References say ``docs/spec.md §N``, except in the
files whose bytes are part of the rules structurer's fingerprint (``structure.rules.rules_fingerprint``: the
clinical package's modules and data tables, the rules package): there the short ``SPEC §N`` (the same spec,
the same check) stays until the rules change anyway, since editing a comment there changes the fingerprint,
every cached record and the demo's ``items.jsonl`` (the guard rows' ``draft_prompt_hash``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "spec.md"
_SECTION = re.compile(r"^## (\d+)\. \S", re.M)
_REF = re.compile(r"§\s*(\d+)")


def _sources() -> list[Path]:
    """The package's text files: code, data tables, prompts, templates (not caches or binaries)."""
    out = []
    for p in sorted((ROOT / "stresstest").rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            try:
                p.read_text("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(p)
    return out


def _fingerprinted(path: Path) -> bool:
    """Is ``path`` hashed into the rules fingerprint (``rules_fingerprint``: clinical/*.py, clinical/data/*.tsv,
    structure/rules/*.py)?"""
    rel = path.relative_to(ROOT / "stresstest").parts
    return (rel[0] == "clinical" and (len(rel) == 2 and path.suffix == ".py"
                                      or rel[1:2] == ("data",) and path.suffix == ".tsv")) or (
        rel[:2] == ("structure", "rules") and path.suffix == ".py")

def test_the_spec_has_its_numbered_sections() -> None:
    numbers = [int(n) for n in _SECTION.findall(SPEC.read_text("utf-8"))]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 13


def test_every_section_reference_in_the_package_resolves() -> None:
    sections = set(_SECTION.findall(SPEC.read_text("utf-8")))
    bad, refs = [], 0
    for p in _sources():
        for n, line in enumerate(p.read_text("utf-8").splitlines(), start=1):
            where = f"{p.relative_to(ROOT)}:{n}"
            if "SPEC.md" in line or ("SPEC §" in line and not _fingerprinted(p)):
                bad.append(f"{where}: cites a spec outside the repository: {line.strip()[:100]}")
            for m in _REF.finditer(line):
                refs += 1
                if m.group(1) not in sections:
                    bad.append(f"{where}: §{m.group(1)} is no section of docs/spec.md")
            if "§" in line and "docs/spec.md §" not in line and not re.search(r"§\s*\d+", line):
                bad.append(f"{where}: a § without a section number")
    assert bad == []
    assert refs > 50  # the package does cite the spec: the scan read what it should


def test_the_short_form_is_left_only_where_the_fingerprint_needs_it() -> None:
    short = sorted(str(p.relative_to(ROOT)) for p in _sources() if "SPEC §" in p.read_text("utf-8"))
    assert short and all(_fingerprinted(ROOT / s) for s in short)
