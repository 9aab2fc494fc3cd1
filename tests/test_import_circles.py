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


def folder_of(module: str) -> str:
    """A module's folder: ``policy_matrix``, ``nodemanager.X`` for a folder X of the package, or
    the module itself for one loose at the package root."""
    parts = module.split(".")
    if parts[0] == "policy_matrix":
        return "policy_matrix"
    if len(parts) > 1 and (ROOT / "nodemanager" / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Folder -> the folders its modules import (a folder's own imports left out)."""
    out: dict[str, set[str]] = {folder_of(m): set() for m in graph}
    for module, targets in graph.items():
        out[folder_of(module)] |= {folder_of(t) for t in targets} - {folder_of(module)}
    return out


def test_no_folder_imports_itself_back_through_others() -> None:
    """The folders stand in layers (docs/architecture.md): none imports, through any chain of
    modules, a folder that imports it back."""
    assert circles(folder_graph(import_graph())) == []


def test_the_folder_check_sees_a_loop_between_two_folders() -> None:
    graph = {"nodemanager.core.a": {"nodemanager.configuration.b"}, "nodemanager.configuration.b": set(),
             "nodemanager.configuration.c": {"nodemanager.core.d"}, "nodemanager.core.d": set()}
    assert circles(folder_graph(graph)) == [["nodemanager.configuration", "nodemanager.core"]]


# folders whose face (its __init__) is the only way in from outside: every name the rest of the
# tree uses of them is on the face; the other folders have no such rule (docs/architecture.md)
FACES = ("nodemanager.model", "nodemanager.preflight")


def past_faces(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                  if folder_of(t) in FACES and t != folder_of(t) and folder_of(m) != folder_of(t))


def test_no_import_goes_past_a_face() -> None:
    assert past_faces(import_graph()) == []


def test_the_face_check_sees_an_import_past_one() -> None:
    assert past_faces({"nodemanager.cycle.x": {"nodemanager.model.records"},
                       "nodemanager.model.plan": {"nodemanager.model.records"}}) == [
        "nodemanager.cycle.x -> nodemanager.model.records"]
