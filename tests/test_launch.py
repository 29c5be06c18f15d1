"""tests/launch.py, the one way the harness's own tests start ``rvvdiff`` and pytest: no other file of tests/
starts either; and what the helper does (a run that fails shows argv, exit status, stdout and stderr)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from launch import pytest_in, rvvdiff

ROOT = Path(__file__).resolve().parent.parent
HELPER = ROOT / "tests" / "launch.py"

#: pytester's and pytest's own ways to run a session, whatever the receiver is called.
_PYTEST_RUNNERS = {"runpytest", "runpytest_subprocess", "runpytest_inprocess", "inline_run", "inline_runsource",
                   "inline_genitems", "spawn_pytest"}
#: Calls that start a process (a module or receiver, then the attribute's name or its prefix).
_STARTERS = {"subprocess": ("run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"),
             "os": ("system", "popen", "exec", "spawn", "posix_spawn"), "pty": ("spawn",),
             "proc": ("run", "execute", "Process"), "pytester": ("run", "popen", "spawn")}


def _names_pytest_or_cli(s: str) -> bool:
    """Whether string ``s`` names pytest or rvvdiff's command line as a program (or a shell command line)."""
    words = s.split()
    first = words[0].rsplit("/", 1)[-1] if words else ""
    return (first in ("pytest", "py.test", "rvvdiff") or s.startswith(("harness.commands", "-mpytest"))
            or "-m pytest" in s or "-m harness.commands" in s)


def _starts(func: ast.expr, imported: dict[str, str]) -> bool:
    """Whether calling ``func`` starts a process (``subprocess.run``, ``run`` imported from subprocess, ...)."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        module, name = func.value.id, func.attr
    elif isinstance(func, ast.Name) and func.id in imported:
        module, name = imported[func.id], func.id
    else:
        return False
    return module in _STARTERS and name.startswith(_STARTERS[module])


def _assignments(scope: ast.AST) -> dict[str, list[ast.expr]]:
    """Name -> the values assigned to it in ``scope``'s own body (not in the functions it defines)."""
    out: dict[str, list[ast.expr]] = {}
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(node.value)
        todo += ast.iter_child_nodes(node)
    return out


def _params(f: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = f.args
    return {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *(v for v in (a.vararg, a.kwarg) if v)]}


def _command_names(node: ast.AST) -> list[str]:
    """The variables a command is made of: ``node`` itself, the items of a list or tuple, ``*`` and ``str()``
    of one (not a variable whose attribute or method is used: that is the output of a run, not a command)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Starred):
        return _command_names(node.value)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [n for e in node.elts for n in _command_names(e)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "Path") and node.args:
        return _command_names(node.args[0])
    return []


def other_starts(text: str) -> list[tuple[int, str]]:
    """(line, what) of every start of pytest or rvvdiff's command line in Python source ``text`` that does not go
    through tests/launch.py: pytester's runpytest and inline_run, ``pytest.main``, a process-starting call whose
    command names pytest or the CLI (a variable holding the command is followed to its assignment in the function,
    else the module), and a function that starts whatever command it is given (a helper of its own)."""
    tree = ast.parse(text)
    imported = {a.asname or a.name: node.module.split(".")[-1] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module for a in node.names}
    module = _assignments(tree)
    out = []

    def strings(node: ast.AST, local: dict[str, list[ast.expr]], params: set[str], seen: frozenset[str]) -> list[str]:
        found = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        for name in _command_names(node):
            if name not in seen and name not in params:
                for v in local.get(name) or module.get(name, []):
                    found += strings(v, local, params, seen | {name})
        return found

    def visit(scope: ast.AST, local: dict[str, list[ast.expr]], params: set[str]) -> None:
        todo = list(ast.iter_child_nodes(scope))
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node, _assignments(node), _params(node))
                continue
            todo += ast.iter_child_nodes(node)
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in _PYTEST_RUNNERS:
                out.append((node.lineno, f"{f.attr}(...)"))
            elif isinstance(f, ast.Attribute) and f.attr == "main" and isinstance(f.value, ast.Name) and f.value.id == "pytest":
                out.append((node.lineno, "pytest.main(...)"))
            elif _starts(f, imported):
                if any(_names_pytest_or_cli(s) for a in [*node.args, *node.keywords] for s in strings(a, local, params,
                                                                                                      frozenset())):
                    out.append((node.lineno, f"{ast.unparse(f)}(...) of pytest or rvvdiff"))
                argv = node.args[0] if node.args else None
                head = argv.elts[0] if isinstance(argv, (ast.List, ast.Tuple)) and argv.elts else argv
                head = head.value if isinstance(head, ast.Starred) else head
                if isinstance(head, ast.Name) and head.id in params:
                    out.append((node.lineno, f"{ast.unparse(f)}(...) starts the command its function is given"))

    visit(tree, module, set())
    return sorted(out)


def test_no_test_starts_pytest_or_the_cli_but_through_launch() -> None:
    wrong = []
    for p in sorted((ROOT / "tests").rglob("*.py")):
        if p != HELPER:
            wrong += [f"{p.relative_to(ROOT)}:{line}: {what}" for line, what in other_starts(p.read_text())]
    assert not wrong, ("the tests start rvvdiff and pytest through tests/launch.py (rvvdiff, pytest_child, "
                       "pytest_in), which isolates the child and shows argv, exit status and output when it fails:\n  "
                       + "\n  ".join(wrong))


def test_the_scan_finds_every_way_in() -> None:
    src = '''
import subprocess, sys, os
from subprocess import run
cmd = [sys.executable, "-m", "harness.commands.cli", "repro"]
subprocess.run([sys.executable, "-m", "harness.commands.cli", "cost"], text=True)
subprocess.run([*cmd, "case"])
subprocess.run([str(ROOT / ".venv/bin/rvvdiff"), "gate"])
run([sys.executable, "-m", "pytest", "cases"])
pytester.runpytest_subprocess("--vlen", "128")
pytester.runpytest("-q")
pytester.inline_run("-q")
pytest.main(["cases"])
os.system("pytest cases -q")
subprocess.Popen(f"{sys.executable} -m pytest cases", shell=True)
subprocess.run([venv / "bin" / "rvvdiff", "--help"])
def _run(argv, cwd):
    return subprocess.run(argv, cwd=cwd)
subprocess.run(["git", "status"])
subprocess.run([mc, "-triple=riscv64"])
rvvdiff("repro", case, code=1)
pytest_child("cases", command=[python, "-m", "pytest"])
cli.main(["known"])
'''
    assert [line for line, _ in other_starts(src)] == [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17]


# ------------------------------------------------------------------ the helper

def test_a_run_with_another_exit_status_fails_showing_argv_status_and_output() -> None:
    with pytest.raises(pytest.fail.Exception) as e:
        rvvdiff("no-such-command", timeout=120)
    said = str(e.value)
    assert said.startswith("exit status 2, expected 0\n$ ") and "-m harness.commands.cli no-such-command" in said
    assert f"in {ROOT}: exit status 2" in said and "--- stdout:" in said
    assert "--- stderr:" in said and "invalid choice: 'no-such-command'" in said
    r = rvvdiff("no-such-command", code=2, timeout=120)  # expected: a result
    assert r.returncode == 2 and r.argv[:3] == [sys.executable, "-m", "harness.commands.cli"]


def test_a_timeout_fails_the_test() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"^the child timed out\n\$ .*\n  in .*: timed out after 0.01 s"):
        rvvdiff("--help", timeout=0.01, code=None)


def test_a_pytest_child_counts_its_outcomes_as_pytester_does(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv("RVVDIFF_SESSION", "the-parent")
    pytester.makepyfile(test_x="""
import os, pytest
def test_own_session(): assert os.environ.get("RVVDIFF_SESSION") != "the-parent"
def test_no(): assert False
@pytest.mark.skip
def test_skip(): pass
""")
    r = pytest_in(pytester, "-p", "no:rvvdiff", "-p", "no:xdist", code=1)
    r.assert_outcomes(passed=1, failed=1, skipped=1)
    assert r.outcomes() == {"passed": 1, "failed": 1, "skipped": 1}
    with pytest.raises(pytest.fail.Exception, match=r"^outcomes \{'passed': 1, 'skipped': 1, 'failed': 1"):
        r.assert_outcomes(passed=2, skipped=1)
    assert r.argv[-2:] == ["-p", "no:cacheprovider"] and f"--basetemp={pytester.path / 'basetemp'}" in r.argv
