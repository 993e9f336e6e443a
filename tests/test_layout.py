"""The layout shows the architecture: no module of smallville imports, even lazily, one that
imports it back (imports for type checking only aside), nor a package one that imports it
back; an underscore name stays in its module; every exception is in errors.py's one tree;
the functions that run a run read at a glance."""

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
    checking = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for n in ast.walk(node)
    }
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
                elif nxt not in seen and nxt > start:  # each cycle once, from its smallest module
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

    elsewhere = sorted(
        f"{name}.{node.name}"
        for name, tree in modules().items()
        if name != "smallville.errors"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(_exception_name(ast.unparse(base).split(".")[-1], errors) for base in node.bases)
    )
    assert elsewhere == []
    classes = [
        c
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, BaseException) and c.__module__ == errors.__name__
    ]
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


NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}  # public, despite the underscore


def test_no_module_uses_another_modules_private_names():
    """An underscore name stays in its module. A module of smallville breaks that when it
    - imports an underscore name (`from smallville.estimate import _prices`), or a module
      with an underscore in its path;
    - reads, writes or calls an attribute `_name` (`stream._rows`, `estimate._prices`,
      `column._index` of a library) that its own source does not define: as a function,
      class, name or parameter, or an attribute set through `self` or `cls`;
    - has a class that defines or uses an underscore name its base class, in another
      module of smallville, defines (run-ahead's dispatcher overriding `Dispatcher._flush`).
    Dunder names and the namedtuple API (`_replace`, `_asdict`, ...) are public. What this
    cannot see: a name two modules both define (each reading the other's goes unnoticed)."""
    trees = modules()
    privates = {name: _private_names(tree) for name, tree in trees.items()}
    found = []
    for name, tree in trees.items():
        found += [f"{name}: {use}" for use in _foreign_uses(tree, privates[name])]
        found += [f"{name}: {use}" for use in _inherited_uses(tree, name, trees)]
    assert found == []


def test_no_package_imports_one_that_imports_it_back():
    """Packages (smallville's subpackages and top-level modules) form no loop: a layer uses
    the ones below it (experiment runs evaluate, run puts sim and brain together, sim asks
    the brain), never one that uses it back."""
    trees = modules()
    package = {name: ".".join(name.split(".")[:2]) for name in trees}
    graph: dict[str, set[str]] = {}
    for name, tree in trees.items():
        graph.setdefault(package[name], set()).update(package[d] for d in imports(tree, set(trees)) - {name})
    reach = {p: _reachable(graph, p) for p in graph}
    loops = {frozenset(q for q in graph if q in reach[p] and p in reach[q]) for p in graph if p in reach[p]}
    loops = {loop for loop in loops if len(loop) > 1}
    assert loops == set()


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__") and name not in NAMEDTUPLE_API


def _private_names(tree: ast.AST) -> set[str]:
    """The underscore names a module's source defines (see the test's docstring)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.alias):
            out.add(node.asname or "")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, (ast.Store, ast.Del))
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            out.add(node.attr)
    return {n for n in out if _private(n)}


def _foreign_uses(tree: ast.AST, own: set[str]) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out += [f"imports {node.module}.{a.name}" for a in node.names if _private(a.name)]
            if any(_private(part) for part in (node.module or "").split(".")):
                out.append(f"imports from {node.module}")
        elif isinstance(node, ast.Import):
            out += [f"imports {a.name}" for a in node.names if any(_private(p) for p in a.name.split("."))]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
    return out


def _inherited_uses(tree: ast.AST, name: str, trees: dict[str, ast.Module]) -> list[str]:
    """Underscore names a class defines or uses through `self` that a base class of it,
    defined in another smallville module, defines too."""
    where = {
        a.asname or a.name: (node.module, a.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("smallville")
        for a in node.names
    }
    out = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for base in (b.id for b in cls.bases if isinstance(b, ast.Name) and b.id in where):
            module, base_name = where[base]
            theirs = next(
                (
                    _private_names(c)
                    for c in ast.walk(trees.get(module, ast.Module(body=[])))
                    if isinstance(c, ast.ClassDef) and c.name == base_name
                ),
                set(),
            )
            mine = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            mine |= {
                n.attr
                for n in ast.walk(cls)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
            }
            out += [f"class {cls.name} uses {base_name}.{n} of {module}" for n in sorted(mine & theirs)]
    return out


def test_every_function_that_runs_a_run_reads_at_a_glance():
    """No function in smallville/run/ (where a run is made, resumed, forked and gone on with)
    is over 40 lines, its nested functions counted in."""
    long = [
        f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in sorted((PACKAGE / "run").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 40
    ]
    assert long == []


def test_no_caller_asks_a_brain_what_it_can_do():
    """What a brain may do is declared on `Brain` with a default (STYLE.md, practice 13): no
    module asks with hasattr or getattr whether a brain has one of its methods."""
    from smallville.brain.base import Brain

    declared = {name for name in vars(Brain) if not name.startswith("_")}
    found = []
    for name, tree in modules().items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in declared
            ):
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert found == []
