"""The engine's layers are checked, not hoped for: the import-linter contracts in pyproject.toml
hold, and no modules of `workflows` import each other in a cycle (imports inside functions count,
imports under `if TYPE_CHECKING:` don't)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def import_graph(package: str, *, type_checking: bool = False) -> grimp.ImportGraph:
    """`type_checking`: count the imports under `if TYPE_CHECKING:` too."""
    return grimp.build_graph(package, exclude_type_checking_imports=not type_checking, cache_dir=None)


def strongly_connected_components(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit). `edges` maps each node to the nodes it
    points at. Returns every component, each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    successors = {node: sorted(targets) for node, targets in edges.items()}

    for root in sorted(successors):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = successors.get(node, [])
            if i < len(targets):
                work.append((node, i + 1))
                target = targets[i]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if work:  # done with node: pass its low-link up to its parent
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return sorted(components)


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The groups of modules that import each other in a cycle (components of more than one)."""
    edges = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    return [c for c in strongly_connected_components(edges) if len(c) > 1]


def describe_cycle(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One shortest cycle through the component's first module, each import with its line."""
    members = set(component)
    start = component[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier and start not in came_from:
        next_frontier = []
        for module in frontier:
            for target in sorted(graph.find_modules_directly_imported_by(module) & members):
                if target not in came_from:
                    came_from[target] = module
                    next_frontier.append(target)
        frontier = next_frontier
    path = [start]
    while True:
        path.append(came_from[path[-1]])
        if path[-1] == start:
            break
    path.reverse()
    lines = [f"cycle among {', '.join(component)}:"]
    for importer, imported in itertools.pairwise(path):
        details = graph.get_import_details(importer=importer, imported=imported)
        where = "; ".join(f"l.{d['line_number']}: {d['line_contents']}" for d in details)
        lines.append(f"  {importer} -> {imported}  ({where})")
    return "\n".join(lines)


def test_workflows_has_no_import_cycles():
    graph = import_graph("workflows")
    assert "workflows.engine.execution" in graph.modules  # the graph is the real package
    cycles = import_cycles(graph)
    assert not cycles, "\n".join(describe_cycle(graph, c) for c in cycles)


def test_engine_and_core_have_no_import_cycles__type_checking_imports_included():
    """The engine is no knot: its primitives are written against `workflows.core.recorder`, not
    against the execution that drives them, so no module of `workflows.engine` or `workflows.core`
    imports another in a circle, even through an import made only for the type checker.
    (import-linter's `acyclic_siblings` contract would say it, but the contracts are checked with
    `exclude_type_checking_imports`, which the layers need: hence this test.)"""
    graph = import_graph("workflows", type_checking=True)
    inner = ("workflows.engine", "workflows.core")
    assert "workflows.core.recorder" in graph.modules  # the graph is the real package
    cycles = [c for c in import_cycles(graph) if any(m.startswith(inner) for m in c)]
    assert not cycles, "\n".join(describe_cycle(graph, c) for c in cycles)


def test_the_cycle_finder_counts_type_checking_imports_when_asked(tmp_path, monkeypatch):
    package = tmp_path / "layers_tc_probe"
    package.mkdir()
    files = {
        "__init__.py": "",
        "c.py": "from . import d\n",
        "d.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from . import c\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))

    assert import_cycles(import_graph("layers_tc_probe")) == []
    graph = import_graph("layers_tc_probe", type_checking=True)
    assert import_cycles(graph) == [["layers_tc_probe.c", "layers_tc_probe.d"]]
    assert "layers_tc_probe.d -> layers_tc_probe.c  (l.4: from . import c)" in describe_cycle(
        graph, ["layers_tc_probe.c", "layers_tc_probe.d"]
    )


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path, monkeypatch):
    package = tmp_path / "layers_cycle_probe"
    package.mkdir()
    files = {
        "__init__.py": "",
        # a -> b at the top, b -> a inside a function: a cycle.
        "a.py": "from . import b\n",
        "b.py": "def late():\n    from . import a\n    return a\n",
        # c -> d at the top, d -> c only under TYPE_CHECKING: no cycle.
        "c.py": "from . import d\n",
        "d.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from . import c\n",
        # e -> f -> g -> e: a longer cycle.
        "e.py": "from . import f\n",
        "f.py": "from . import g\n",
        "g.py": "import layers_cycle_probe.e\n",
    }
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))

    graph = import_graph("layers_cycle_probe")
    cycles = import_cycles(graph)

    assert cycles == [
        ["layers_cycle_probe.a", "layers_cycle_probe.b"],
        ["layers_cycle_probe.e", "layers_cycle_probe.f", "layers_cycle_probe.g"],
    ]
    message = describe_cycle(graph, cycles[0])
    assert "layers_cycle_probe.b -> layers_cycle_probe.a  (l.2: from . import a)" in message
    assert describe_cycle(graph, cycles[1]).count(" -> ") == 3


def test_strongly_connected_components_on_plain_graphs():
    assert strongly_connected_components({"x": set()}) == [["x"]]
    assert strongly_connected_components({"x": {"x"}}) == [["x"]]
    assert strongly_connected_components({"x": {"y"}, "y": {"z"}, "z": set()}) == [["x"], ["y"], ["z"]]
    assert strongly_connected_components({"x": {"y"}, "y": {"x", "z"}, "z": {"w"}, "w": {"z"}}) == [
        ["w", "z"],
        ["x", "y"],
    ]


def test_import_linter_contracts_are_kept():
    """`lint-imports` over the contracts in pyproject.toml, in a process of its own (it sets up
    logging its own way)."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache",
            "--no-logo",
            str(ROOT / "pyproject.toml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 broken" in result.stdout


def test_the_engine_contract_names_every_app_root_module():
    """A new top-level module of `workflows` is app root: the engine must not import it either.
    `workflows.telemetry` is no app root: a leaf the engine's client opens producer spans with
    (its own contract, telemetry-leaf, keeps it free of Django and of the app root)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["id"] == "engine-no-app")
    layers = {"workflows.core", "workflows.storage", "workflows.engine", "workflows.telemetry"}
    app_root = import_graph("workflows").find_children("workflows") - layers
    missing = sorted(app_root - set(contract["forbidden_modules"]))
    assert app_root and not missing, f"add to engine-no-app's forbidden_modules: {missing}"
