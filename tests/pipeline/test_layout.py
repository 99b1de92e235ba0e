"""The package layout rules the typed run model depends on (checked on the source, so they cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "stresstest"


def _sources() -> dict[str, str]:
    return {str(p.relative_to(PKG)): p.read_text("utf-8") for p in PKG.rglob("*.py")}


def test_only_the_cli_imports_the_runner() -> None:
    pat = re.compile(
        r"^\s*(from\s+stresstest\.pipeline\.runner\s+import|from\s+stresstest\.pipeline\s+import\s+"
        r"[^\n]*\brunner\b|import\s+stresstest\.pipeline\.runner)",
        re.M,
    )
    offenders = sorted(f for f, src in _sources().items() if pat.search(src) and f != "cli.py")
    assert offenders == []


def test_conditions_are_asked_of_the_grid_not_parsed() -> None:
    guard_parse = [f for f, src in _sources().items() if 'removesuffix("_guard")' in src and f != "grid.py"]
    # keys only a condition has (item rows and report rows also carry a 'condition' key, so it is not checked)
    dict_access = [f for f, src in _sources().items() if re.search(r'\bc\[["\'](family|snr_db|mitigated)["\']\]', src)]
    assert guard_parse == [] and dict_access == []
    from stresstest.config import RunConfig

    assert not hasattr(RunConfig, "conditions")  # the grid is RunConfig.grid(), typed


def test_record_schema_is_outside_the_structuring_stage() -> None:
    users = [f for f, src in _sources().items() if "stresstest.structure.schema" in src]
    assert users == [] and (PKG / "schema.py").is_file() and not (PKG / "structure" / "schema.py").exists()
