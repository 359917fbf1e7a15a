"""The package's layers, read from its own imports (every `import`, at module level or inside a
function): a folder imports only folders of its own layer or below, the folders of one layer
import each other without a cycle, and no module imports itself back through others.

The layers are the ones `udo_build/__init__.py` documents; this test is their enforcement. A new
folder must be given a layer here, or the test fails and says so.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "udo_build"

# lowest first; a folder (or top-level module) may import its own layer and those below
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "errors", "canonical", "source", "atomic", "schema_problems"),
    ("ir", "soc", "store", "rewrite"),
    ("store/remote",),  # the remote tier, above the local store: store/ never imports it
    ("kernels",),
    ("runtime",),
    ("recipe", "opdef", "package", "model", "quant", "compiler"),
    ("builder",),
    ("cli", "__main__"),
)
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The udo_build modules `module` imports (the longest known prefix of each name)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            # `from pkg import module` reads the module; `from pkg import name`, the package
            names += [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                      for alias in node.names]
    out = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name.startswith("udo_build") and name != module:
            out.add(name)
    return out


def _edges() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {m: _imported(m, p, known) for m, p in modules.items()}


SUBFOLDERS = ("store/remote",)  # folders inside a folder that are a layer of their own


def _unit(module: str) -> str:
    """The folder (or top-level module) a module belongs to: udo_build.compiler.rules ->
    compiler; udo_build.store.remote.tier -> store/remote; udo_build itself -> __init__."""
    parts = module.split(".")
    for sub in SUBFOLDERS:
        if parts[1:1 + sub.count("/") + 1] == sub.split("/"):
            return sub
    return parts[1] if len(parts) > 1 else "__init__"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _unit_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = defaultdict(set)
    for module, targets in edges.items():
        units[_unit(module)] |= {_unit(t) for t in targets if _unit(t) != _unit(module)}
    return units


def test_every_folder_has_a_layer() -> None:
    units = {_unit(m) for m in _modules()}
    assert not units - set(LAYER_OF), (
        f"give these folders a layer in tests/test_layers.py: {sorted(units - set(LAYER_OF))}")


def test_imports_point_down() -> None:
    wrong = sorted(
        f"{module} imports {target} ({_unit(module)}, layer {LAYER_OF[_unit(module)]} -> "
        f"{_unit(target)}, layer {LAYER_OF[_unit(target)]})"
        for module, targets in _edges().items() for target in targets
        if LAYER_OF.get(_unit(target), -1) > LAYER_OF.get(_unit(module), -1))
    assert not wrong, "imports that point up:\n" + "\n".join(wrong)


def test_no_cycle_between_folders() -> None:
    assert _cycles(_unit_graph(_edges())) == []


def test_no_cycle_between_modules() -> None:
    assert _cycles(_edges()) == []


def test_commands_do_not_import_each_other() -> None:
    shared = {"udo_build.cli", "udo_build.cli.common", "udo_build.cli.reporter"}
    wrong = sorted(f"{module} imports {target}" for module, targets in _edges().items()
                   if module.startswith("udo_build.cli.") and module not in shared
                   for target in targets
                   if target.startswith("udo_build.cli") and target not in shared)
    assert not wrong, "a command imports another (share it through cli/common.py):\n" + \
        "\n".join(wrong)


@pytest.mark.parametrize("graph, cycles", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}}, [["a", "b", "c"]]),
])
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], cycles: list) -> None:
    assert _cycles(graph) == cycles


def test_imports_are_read_relative_and_inside_functions(tmp_path: Path) -> None:
    edges = _edges()
    # a relative import inside a function (cli/__init__.py loads its command modules lazily)
    assert "udo_build.model.op_check" in edges["udo_build.cli.info"]
    assert "udo_build.errors" in edges["udo_build.cli"]


def test_the_remote_tier_is_its_own_layer() -> None:
    assert _unit("udo_build.store.remote.tier") == "store/remote"
    assert _unit("udo_build.store.remote") == "store/remote"
    assert _unit("udo_build.store.cas") == "store"
    assert LAYER_OF["store"] < LAYER_OF["store/remote"] < LAYER_OF["builder"]
