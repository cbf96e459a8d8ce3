"""The package's import graph has no loops (imports inside functions count too), module by
module and subpackage by subpackage, and the root holds only the modules the README lists."""

import ast
import pathlib

import activemem_jax

ROOT = pathlib.Path(activemem_jax.__file__).parent
ROOT_MODULES = {"__init__", "build", "config_files", "schema", "serve", "shapes", "sharding"}


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("activemem_jax",) + path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: pathlib.Path, known) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rsplit(".", 1)[0]
                base = f"{pkg}.{base}" if base else pkg
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in known and m != name}


def _cycle(graph: dict[str, set[str]]):
    """One cycle as a list of nodes, or None (depth-first search, three colours)."""
    colour, stack = {}, []

    def visit(u):
        colour[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if colour.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in colour and (found := visit(v)):
                return found
        colour[u] = 2
        stack.pop()
        return None

    for u in sorted(graph):
        if u not in colour and (found := visit(u)):
            return found
    return None


def _graphs():
    mods = _modules()
    modules = {m: _imports(m, p, mods) for m, p in mods.items()}
    sub = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    packages: dict[str, set[str]] = {}
    for m, deps in modules.items():
        packages.setdefault(sub(m), set()).update(sub(d) for d in deps if sub(d) != sub(m))
    return modules, packages


def test_no_import_loops_between_modules_or_subpackages():
    modules, packages = _graphs()
    assert len(modules) > 50 and sum(map(len, modules.values())) > 100  # the walk saw the package
    assert _cycle(modules) is None, f"module import loop: {' -> '.join(_cycle(modules))}"
    assert _cycle(packages) is None, f"subpackage import loop: {' -> '.join(_cycle(packages))}"


def test_the_cycle_finder_finds_a_loop():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_root_holds_only_the_listed_modules():
    loose = {p.stem for p in ROOT.glob("*.py")}
    assert loose == ROOT_MODULES, f"root modules {sorted(loose - ROOT_MODULES)} belong in a subpackage"


def test_the_library_does_not_import_the_orchestrator_or_the_launchers():
    """hymem builds on activemem_jax, never the reverse; launch/ and configs/ are entry
    points the library never imports (a test or a launcher passes a config in)."""
    bad = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            mods = ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            bad += [f"{name} imports {m}" for m in mods if m.split(".")[0] in ("hymem", "launch", "configs")]
    assert not bad, bad
