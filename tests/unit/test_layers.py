"""The package tree is the pipeline: each layer imports only the layers below it, and no cycle.

    core -> config -> load -> stats -> report -> metrics -> run -> readback -> store -> commands -> cli

A module may import its own package and any lower one, never a higher one, so reading the
tree top-down is reading the program from its foundations up. Imports made only for type
annotations (under `if TYPE_CHECKING:`) count too: they are dependencies all the same.
Relative imports are refused (they would hide a layer from this test), and so is a package
that is not in LAYERS. The tree is also what its comments say it is: a comment or docstring
that names a file (`runner/load/engine.py`, `tests/support/certs.py`) or a module
(`runner.stats.recorder.Tally`) that does not exist fails, so the map a reader follows stays true.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "runner"
LAYERS = ("core", "config", "load", "stats", "report", "metrics", "run", "readback", "store", "commands", "cli")


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
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path.name}:{node.lineno}: a relative import; name the layer: "
                                 "from runner.<layer>... import ...")
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
    loose = [name for name in MODULES if name.count(".") >= 1 and name.split(".")[1] not in LAYERS
             and name not in ("runner.__main__",)]
    assert not loose, f"modules outside the layers: {loose}"


def test_every_package_is_in_a_layer() -> None:
    """A new package (a folder with modules in it) is a new layer: it must be placed in LAYERS."""
    packages = sorted({path.relative_to(RUNNER).parts[0] for path in RUNNER.glob("*/**/*.py")} - set(LAYERS))
    assert not packages, f"packages missing from the layer list: {packages}"


# What a comment or docstring may name: a file of the repository by its path, or a module
# (and a name defined at its top) by its dotted name.
_PATH = re.compile(r"(?<![\w/.-])((?:runner|docs|tests|bench|manifests|\.ci|\.github)/[\w./*-]*[\w*])")
_DOTTED = re.compile(r"(?<![\w.])(runner(?:\.\w+)+)")
# This file is left out: its examples of wrong names below are wrong on purpose.
SOURCES = sorted(path for path in [*RUNNER.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").glob("*.py")]
                 if path != Path(__file__).resolve())


def _texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and string literal (docstrings included) in a file."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(t.start[0], t.string) for t in tokens if t.type in (tokenize.COMMENT, tokenize.STRING)]


def _top_names(path: Path) -> set[str]:
    """The names a module defines or imports at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def missing_path(text: str) -> str | None:
    """The first repository path named in `text` that matches no file ("*" as a glob)."""
    for match in _PATH.finditer(text):
        named = match.group(1).rstrip(".")
        if not (any(ROOT.glob(named)) if "*" in named else (ROOT / named).exists()):
            return named
    return None


def missing_module(text: str) -> str | None:
    """The first dotted name in `text` whose module does not exist, or whose module does not define it."""
    for match in _DOTTED.finditer(text):
        parts = match.group(1).split(".")
        for end in range(len(parts), 1, -1):
            file = ROOT.joinpath(*parts[:end]).with_suffix(".py")
            package = ROOT.joinpath(*parts[:end], "__init__.py")
            if file.exists() or package.exists():
                break
        else:
            return match.group(1)
        if end < len(parts) and file.exists() and parts[end] not in _top_names(file):
            return match.group(1)
    return None


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_comments_name_only_what_exists(path: Path) -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line}: {name}" for line, text in _texts(path)
             for name in (missing_path(text), missing_module(text)) if name]
    assert not wrong, "comments or docstrings name what does not exist:\n" + "\n".join(wrong)


@pytest.mark.parametrize(("text", "wrong"), [
    ("see runner/load/engine.py", None), ("see runner/redact.py", "runner/redact.py"),
    ("tests/golden/ab-*.txt", None), ("tests/golden/zz-*.txt", "tests/golden/zz-*.txt"),
    ("runner.stats.recorder.Tally", None), ("runner.stats.recorder.Nope", "runner.stats.recorder.Nope"),
    ("runner.nowhere.thing", "runner.nowhere.thing"),
])
def test_the_comment_check_itself(text: str, wrong: str | None) -> None:
    assert (missing_path(text) or missing_module(text)) == wrong


def test_a_relative_import_is_refused(tmp_path: Path) -> None:
    module = RUNNER / "core" / "units.py"  # any real module, read as if it had a relative import
    fake = tmp_path / "fake.py"
    fake.write_text(module.read_text() + "\nfrom . import units\n")
    with pytest.raises(AssertionError, match="relative import"):
        imports(fake)
