"""The package tree is the pipeline: each layer imports only the layers below it, and no cycle.

    core -> config -> load -> stats -> report -> metrics -> run -> readback -> commands -> cli

A module may import its own package and any lower one, never a higher one, so reading the
tree top-down is reading the program from its foundations up. Imports made only for type
annotations (under `if TYPE_CHECKING:`) count too: they are dependencies all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[2] / "runner"
LAYERS = ("core", "config", "load", "stats", "report", "metrics", "run", "readback", "commands", "cli")


def layer_of(module: str) -> int:
    """`runner.load.engine` -> the index of `load`; `runner.cli` (and `python -m runner`) -> cli's;
    `runner` itself (the version) -> 0."""
    parts = module.split(".")
    if module == "runner.__main__":
        return LAYERS.index("cli")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else 0


def module_name(path: Path) -> str:
    relative = path.relative_to(RUNNER.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Every runner module that `path` imports, wherever in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("runner"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names
                         if (RUNNER.parent / node.module.replace(".", "/") / f"{alias.name}.py").exists())
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("runner"))
    return found


MODULES = {module_name(path): path for path in sorted(RUNNER.rglob("*.py"))}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_higher_layer(module: str) -> None:
    higher = sorted(name for name in imports(MODULES[module]) if layer_of(name) > layer_of(module))
    assert not higher, f"{module} (layer {LAYERS[layer_of(module)]}) imports {higher}"


def test_no_import_cycle() -> None:
    graph = {name: {i for i in imports(path) if i in MODULES and i != name} for name, path in MODULES.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for nxt in sorted(graph[name]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [name, nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_every_module_is_in_a_layer() -> None:
    loose = [name for name in MODULES if name.count(".") == 1 and name.split(".")[1] not in LAYERS
             and name not in ("runner.__main__",)]
    assert not loose, f"modules outside the layers: {loose}"
