"""The package's dependencies point one way: a layer imports only its own layer and the layers below it.

The graph is read off the source with :mod:`ast`: every ``import`` / ``from ... import`` of a ``stresstest``
module, at module level or inside a function (a function-level import that dodges a cycle is still an edge, so
it cannot hide one), ``if TYPE_CHECKING:`` blocks included.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "stresstest"

#: Bottom to top. A module belongs to the layer of its longest matching prefix.
#: The report sits below the pipeline: it reads a run directory through ``stresstest.results`` and the metrics,
#: never the runner, and the runner's last stage writes it (as the CLI's ``report`` command does).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "stresstest",
            "stresstest.errors",
            "stresstest.ids",
            "stresstest.console",
            "stresstest.progress",
            "stresstest.yamlcfg",
            "stresstest.net",
            "stresstest.cache",
            "stresstest.audio",
            "stresstest.records",
            "stresstest.schema",
            "stresstest.grid",
            "stresstest.results",
            "stresstest.textnorm",
            "stresstest.children",
            "stresstest.paths",
            "stresstest.provenance",
            "stresstest.steps",
        ),
    ),
    ("clinical", ("stresstest.clinical",)),
    (
        "stages",
        (
            "stresstest.corpus",
            "stresstest.speech",
            "stresstest.noise",
            "stresstest.asr",
            "stresstest.llm",
            "stresstest.gold",
            "stresstest.structure",
            "stresstest.mitigation",
        ),
    ),
    ("metrics", ("stresstest.metrics",)),
    ("config", ("stresstest.config",)),
    ("report", ("stresstest.report",)),
    ("pipeline", ("stresstest.pipeline",)),
    ("cli", ("stresstest.cli", "stresstest.cli_gold")),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _graph() -> dict[str, dict[str, int]]:
    """module -> {imported stresstest module: line of the first such import}."""
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, dict[str, int]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # "from pkg import sub" imports the module pkg.sub; "from mod import name" imports mod
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod for a in node.names]
            for t in targets:
                while t and t not in files:  # "import stresstest.a.b" names a module; keep the longest that exists
                    t = t.rpartition(".")[0]
                if t.startswith("stresstest") and t != name:
                    edges.setdefault(t, node.lineno)
        graph[name] = edges
    return graph


def _layer(module: str) -> int:
    best, rank = -1, -1
    for k, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            # the root package's name matches only itself: a new module must be given a layer
            if (module == p or (p != "stresstest" and module.startswith(p + "."))) and len(p) > best:
                best, rank = len(p), k
    return rank


def test_every_module_has_a_layer() -> None:
    assert [m for m in _graph() if _layer(m) < 0] == []


def test_no_upward_import() -> None:
    upward = [
        f"{src}:{line} imports {dst} ({LAYERS[_layer(src)][0]} -> {LAYERS[_layer(dst)][0]})"
        for src, edges in sorted(_graph().items())
        for dst, line in sorted(edges.items())
        if _layer(dst) > _layer(src)
    ]
    assert upward == []


def test_no_import_cycle() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_the_graph_is_read() -> None:
    # The checks above are only as good as the parser: a known downward edge must be in the graph.
    graph = _graph()
    assert "stresstest.results" in graph["stresstest.report.rundir"]
    assert "stresstest.clinical.claims" in graph["stresstest.gold.workflow"]
    assert _layer("stresstest.pipeline.runner") > _layer("stresstest.report.build") > _layer("stresstest.metrics.wer")


def test_the_package_ships_no_test_support() -> None:
    """Test support (stub servers, fault proxies, synthetic runs) lives in ``tests/support`` and ``tests/``: no module
    of the package imports it, and none is a stub of its own (``stresstest.llm.testing`` moved out, issue 38)."""
    imports: list[str] = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            imports += [
                f"{path.relative_to(PKG.parent)}: {n}"
                for n in names
                if n.split(".")[0] in ("support", "tests", "conftest", "synthetic_run", "outcome_checks")
            ]
    assert imports == []
    assert not any(p.stem in ("testing", "stub", "stubs") for p in PKG.rglob("*.py"))
