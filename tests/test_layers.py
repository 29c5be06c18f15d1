"""The house's layout holds: harness's packages import only the layers below them, no module imports
a test module, and the imports between rvvdiff's own modules have no cycle.

The layers are the ones harness/__init__.py lists; a new package goes into ``LAYERS`` and that list.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["core", "ggml", "toolchain", "binary", "emulators", "model", "check", "cost", "report", "upstream", "plugin",
          "jobs", "commands"]
PACKAGES = ("harness", "oracles", "cases", "costs")


def _modules() -> dict[str, Path]:
    out = {}
    for top in PACKAGES:
        for p in sorted((ROOT / top).rglob("*.py")):
            parts = p.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


MODULES = _modules()


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of an rvvdiff module in ``path``, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for n in names:
            if n.split(".")[0] in PACKAGES:
                while n not in MODULES and "." in n:
                    n = n.rsplit(".", 1)[0]
                if n in MODULES:
                    out.append((node.lineno, n))
    return out


GRAPH = {m: sorted({n for _, n in _imports(p) if n != m}) for m, p in MODULES.items()}


def test_every_harness_module_is_in_a_layer() -> None:
    """A module directly under harness/ (other than its __init__) or a package not in ``LAYERS`` escapes the check below."""
    wrong = []
    for m, p in MODULES.items():
        parts = m.split(".")
        if parts[0] != "harness" or len(parts) < 2:
            continue
        if p.parent == ROOT / "harness":
            wrong.append(f"{p.relative_to(ROOT)}: a module directly under harness/, in no layer: move it into one")
        elif parts[1] not in LAYERS:
            wrong.append(f"{p.relative_to(ROOT)}: package harness.{parts[1]} is not a layer: add it to LAYERS here "
                         "and to harness/__init__.py's list, or move the module into a layer")
    assert not wrong, "\n".join(wrong)


def test_layers_are_not_crossed_upwards() -> None:
    wrong = []
    for m, p in MODULES.items():
        parts = m.split(".")
        if parts[0] != "harness" or len(parts) < 2 or parts[1] not in LAYERS:
            continue  # (test_every_harness_module_is_in_a_layer says where such a module belongs)
        here = LAYERS.index(parts[1])
        for line, n in _imports(p):
            there = n.split(".")
            if there[0] == "harness" and len(there) > 1 and there[1] in LAYERS and LAYERS.index(there[1]) > here:
                wrong.append(f"{p.relative_to(ROOT)}:{line}: {parts[1]} imports {n}, a layer above it")
    assert not wrong, "\n".join(wrong)


def test_commands_are_shells_over_the_layers() -> None:
    """A subcommand's module parses its arguments and calls the layers: no module of harness/commands imports
    another, except cli.py, which imports the subcommands."""
    wrong = [f"{m} imports {n}: move what both need into a layer below harness/commands" for m in MODULES
             if m.startswith("harness.commands.") and m != "harness.commands.cli"
             for n in GRAPH[m] if n.startswith("harness.commands.")]
    assert not wrong, "\n".join(wrong)


def test_oracles_import_no_harness() -> None:
    wrong = [f"{m} imports {n}" for m in MODULES if m.startswith("oracles") for n in GRAPH[m] if n.startswith("harness")]
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_a_test_module() -> None:
    wrong = [f"{m} imports {n}" for m in MODULES for n in GRAPH[m] if n.rsplit(".", 1)[-1].startswith("test_")]
    for p in sorted((ROOT / "tests").glob("*.py")):  # the project's own tests may use helpers, not each other
        wrong += [f"tests/{p.name} imports {n}" for _, n in _imports(p) if n.rsplit(".", 1)[-1].startswith("test_")]
    assert not wrong, "\n".join(wrong)


def _cycle() -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in GRAPH.get(m, []):
            if n in GRAPH and not n.startswith(m + ".") and not m.startswith(n + "."):  # a package and its own modules
                if state.get(n) == 1:
                    return stack[stack.index(n):] + [n]
                if n not in state and (c := visit(n)):
                    return c
        stack.pop()
        state[m] = 2
        return None

    for m in GRAPH:
        if m not in state and (c := visit(m)):
            return c
    return None


def test_no_import_cycle() -> None:
    c = _cycle()
    assert c is None, "import cycle: " + " -> ".join(c or [])


@pytest.mark.parametrize("top", PACKAGES)
def test_every_package_says_what_it_owns(top: str) -> None:
    missing = [str(p.relative_to(ROOT)) for p in sorted((ROOT / top).rglob("__init__.py"))
               if ast.get_docstring(ast.parse(p.read_text())) is None]
    assert not missing, f"packages without a docstring saying what they own: {missing}"
