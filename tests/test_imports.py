"""The package's imports go one way: no module imports, however indirectly, a module that imports it.

The graph is read from the source with `ast`, not by importing anything: every ``import`` and
``from ... import`` statement of every anonymizer/**/*.py counts, at the top of a module or inside
a function, a ``TYPE_CHECKING`` block or a ``try`` alike (a lazy import still closes a cycle; it
only hides it until the call).  An edge goes from the importing module to the module imported:
``from anonymizer.classifier import postprocess`` to ``anonymizer.classifier.postprocess`` when
that is a module of the package, else to ``anonymizer.classifier`` itself.  Parent packages'
``__init__`` files, which Python runs on the way, are not edges (``anonymizer/__init__.py``
imports its names by ``importlib`` when first used, so it is no hub).
"""

from __future__ import annotations

import ast
from pathlib import Path

import anonymizer

PACKAGE = Path(anonymizer.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from its own package up
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules and "." in target:  # import a.b.c of a module a.b
                    target = target.rpartition(".")[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path that ends where it starts, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert len(graph) > 30
    assert "anonymizer.classifier.model" in graph["anonymizer.registry"]  # imported inside _svm
    assert "anonymizer.classifier.postprocess" in graph["anonymizer.classifier.model"]  # from package import module
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_layers_of_the_run_and_of_the_classifier():
    graph = import_graph()

    def reaches(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    assert "anonymizer.parallel" in graph["anonymizer.run"] and "anonymizer.worker" in graph["anonymizer.parallel"]
    assert not {"anonymizer.run", "anonymizer.parallel"} & reaches("anonymizer.worker")
    # the scorer knows nothing of the classifier; training and cross-validation never reach the commands
    assert not any(m.startswith("anonymizer.classifier") for m in reaches("anonymizer.scoring"))
    for lower in ("anonymizer.classifier.training", "anonymizer.classifier.crossval"):
        assert not {"anonymizer.evaluate", "anonymizer.classifier.train", "anonymizer.cli"} & reaches(lower)
    # the detection core takes plain settings (anonymizer.settings) and knows no configuration file
    parts = ("anonymizer.detectors.", "anonymizer.surrogates.")
    core = ["anonymizer.pipeline", "anonymizer.registry", *(m for m in graph if m.startswith(parts))]
    for module in core:
        assert "anonymizer.config" not in reaches(module), module


def test_no_function_shadows_a_submodule_of_its_package():
    """`anonymizer.classifier.train` is the module whatever was imported before (no function of that name)."""
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    for init in PACKAGE.rglob("__init__.py"):
        package = module_name(init)
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            names = []
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            for name in names:
                assert f"{package}.{name}" not in modules, f"{package}.{name} is both a module and a name of its package"
