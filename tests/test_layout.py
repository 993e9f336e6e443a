"""The layout shows the architecture: no module of smallville imports, even lazily, one that
imports it back (imports for type checking only aside)."""

from __future__ import annotations

import ast

from conftest import ROOT

PACKAGE = ROOT / "smallville"


def modules() -> dict[str, ast.Module]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def imports(tree: ast.Module, known: set[str]) -> set[str]:
    """The smallville modules a module imports anywhere in it, `if TYPE_CHECKING:` aside."""
    checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and getattr(node.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("smallville"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            out |= subs | ({node.module} if len(subs) < len(node.names) else set())
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & known
    return out


def test_no_module_imports_one_that_imports_it_back():
    trees = modules()
    graph = {name: imports(tree, set(trees)) - {name} for name, tree in trees.items()}
    cycles = []
    for start in sorted(graph):
        path, seen = [start], {start}

        def walk(node: str) -> None:
            for nxt in sorted(graph[node]):
                if nxt == start:
                    cycles.append(path + [start])
                elif nxt not in seen and nxt > start:      # each cycle once, from its smallest module
                    seen.add(nxt)
                    path.append(nxt)
                    walk(nxt)
                    path.pop()

        walk(start)
    assert cycles == []
