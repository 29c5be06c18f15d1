"""One alias per module: a module of rvvdiff imported under an alias gets the same alias in every file,
and an alias names one module everywhere, so `Q.` or `R.` means the same thing in every file a reader
opens (array-api-tests keeps `hh`, `ph`, `dh` the same way).  Importing without an alias is always fine.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "oracles", "cases", "costs")


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _aliases() -> dict[tuple[str, str], list[str]]:
    """(module, alias) -> the places (file:line) that import the module under the alias."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    files = [p for top in (*PACKAGES, "tests") for p in sorted((ROOT / top).rglob("*.py"))]
    for path in files + [ROOT / "conftest.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            pairs: list[tuple[str, str]] = []
            if isinstance(node, ast.Import):
                pairs = [(a.name, a.asname) for a in node.names if a.asname]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                pairs = [(f"{node.module}.{a.name}", a.asname) for a in node.names if a.asname]
            for module, alias in pairs:
                if module.split(".")[0] in PACKAGES and _is_module(module):
                    out[(module, alias)].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return out


ALIASES = _aliases()


def test_aliases_are_found() -> None:
    assert ("oracles.quants", "Q") in ALIASES, "the scan found no `from oracles import quants as Q`"


def test_a_module_has_one_alias() -> None:
    by_module: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for (module, alias), where in ALIASES.items():
        by_module[module][alias] = where
    wrong = [f"{m} is imported as " + ", ".join(f"{a} ({where[0]}{' ...' if len(where) > 1 else ''})"
                                                for a, where in sorted(aliases.items()))
             for m, aliases in sorted(by_module.items()) if len(aliases) > 1]
    assert not wrong, "pick one alias per module and use it everywhere:\n" + "\n".join(wrong)


def test_an_alias_names_one_module() -> None:
    by_alias: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for (module, alias), where in ALIASES.items():
        by_alias[alias][module] = where
    wrong = [f"{a} names " + ", ".join(f"{m} ({where[0]})" for m, where in sorted(modules.items()))
             for a, modules in sorted(by_alias.items()) if len(modules) > 1]
    assert not wrong, "an alias must mean one module everywhere; rename one of:\n" + "\n".join(wrong)
