"""No import circles: no module of ``nodemanager`` or ``policy_matrix`` imports, however indirectly,
a module that imports it back. Every import counts (inside functions and ``TYPE_CHECKING`` too): a
circle hidden behind a late import is still two modules that can only be understood together."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("nodemanager", "policy_matrix")


def modules() -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every module of the packages."""
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: pathlib.Path, known: dict[str, pathlib.Path]) -> set[str]:
    """The modules of the packages that ``name`` imports (``from a import b`` names ``a.b`` when
    that is a module, else ``a``)."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[:len(here) - node.level + 1]
                base = ".".join(here + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_no_module_imports_itself_back_through_others() -> None:
    assert circles(import_graph()) == []


def test_the_check_sees_a_circle_through_a_late_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    # the real graph is read whole: imports inside functions and TYPE_CHECKING blocks count
    graph = import_graph()
    assert "nodemanager.cloud.libcloud_driver" in graph["nodemanager.cloud"]


def test_the_core_names_no_scheduler() -> None:
    for path in (ROOT / "nodemanager" / "core").rglob("*.py"):
        text = path.read_text().lower()
        for word in ('"htcondor"', "'htcondor'", '"slurm"', "'slurm'"):
            assert word not in text, f"{path.relative_to(ROOT)} names a scheduler: {word}"
