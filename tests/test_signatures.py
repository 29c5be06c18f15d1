"""No function of harness/ takes more than six positional parameters: a longer list is read wrong at its call
sites (eleven arguments in a row, some of them the axes of one target).  Past six, the rest are keyword-only
(after ``*``), or travel as one value: a target is a ``harness.core.matrix.Point``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOST = 6

#: Functions of harness/cost/ whose argument lists that package's own reorganisation settles; an entry that no
#: longer names a function with too many positional parameters fails the test below: remove it.
PENDING: set[str] = set()


def positional(fn: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool) -> list[str]:
    """The names of ``fn``'s positional parameters (a method's ``self`` / ``cls`` not counted; keyword-only ones and
    ``*args`` / ``**kwargs`` neither)."""
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return names[1:] if in_class and names[:1] in (["self"], ["cls"]) else names


def _visit(node: ast.AST, where: str, in_class: bool, out: dict[str, int]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = len(positional(child, in_class))
            if n > MOST:
                out[f"{where}{child.name}"] = n
            _visit(child, f"{where}{child.name}.", False, out)
        elif isinstance(child, ast.ClassDef):
            _visit(child, f"{where}{child.name}.", True, out)
        else:
            _visit(child, where, in_class, out)


def too_long() -> dict[str, int]:
    """``path::qualified name`` -> its number of positional parameters, for every function of harness/ past
    :data:`MOST`."""
    out: dict[str, int] = {}
    for path in sorted((ROOT / "harness").rglob("*.py")):
        _visit(ast.parse(path.read_text()), f"{path.relative_to(ROOT).as_posix()}::", False, out)
    return out


def test_no_function_takes_more_than_six_positional_parameters() -> None:
    found = too_long()
    wrong = [f"{name}: {n} positional parameters; make those past the first few keyword-only (after `*`), or pass "
             f"a target whole (harness.core.matrix.Point)" for name, n in found.items() if name not in PENDING]
    stale = [f"{name}: in PENDING but no longer takes more than {MOST} positional parameters (or is gone): remove it "
             "from PENDING in tests/test_signatures.py" for name in sorted(PENDING - set(found))]
    assert not wrong + stale, "\n".join(wrong + stale)


def test_the_count_sees_what_it_should() -> None:
    """Keyword-only parameters, ``*args`` and a method's ``self`` do not count; nested functions and methods are seen."""
    tree = ast.parse("def f(a, b, *args, c, d, e, f, g, h, **kw): pass\n"
                     "class C:\n    def m(self, a, b, c, d, e, f): pass\n    def n(self, a, b, c, d, e, f, g): pass\n")
    f, c = tree.body
    assert positional(f, False) == ["a", "b"]
    assert [len(positional(m, True)) for m in c.body] == [6, 7]
