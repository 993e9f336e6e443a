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


def test_every_exception_lives_in_the_one_tree():
    """Every exception class of smallville is defined in smallville/errors.py and drawn in its
    docstring's tree; each one a user sees has its exit code."""
    from smallville import errors

    elsewhere = sorted(f"{name}.{node.name}" for name, tree in modules().items() if name != "smallville.errors"
                       for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                       and any(_exception_name(ast.unparse(base).split(".")[-1], errors) for base in node.bases))
    assert elsewhere == []
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, BaseException)
               and c.__module__ == errors.__name__]
    drawn = errors.__doc__
    assert [c.__name__ for c in classes if c.__name__ not in drawn] == []
    for c in classes:
        if issubclass(c, errors.SmallvilleError):
            assert f"(exit {c.exit_code})" in drawn.split(c.__name__, 1)[1].split("+--", 1)[0], c.__name__


def _exception_name(name: str, errors) -> bool:
    """Whether a base class named `name` is an exception (a builtin's or one of the tree's)."""
    import builtins

    found = getattr(builtins, name, None) or getattr(errors, name, None)
    return isinstance(found, type) and issubclass(found, BaseException)
