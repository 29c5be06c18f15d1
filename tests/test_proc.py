"""harness/core/proc.py, the one door for processes: no other module of harness/, cases/, costs/ or
oracles/ starts one itself; and what the door does (bytes, results that do not raise, timeouts that
kill the child's process group, long-lived processes under a deadline)."""

from __future__ import annotations

import ast
import os
import sys
import time
from pathlib import Path

import pytest

from harness.core import proc
from harness.core.proc import CommandError, Process, deadline, execute, run

ROOT = Path(__file__).resolve().parent.parent
DOOR = ROOT / "harness" / "core" / "proc.py"
SCANNED = ("harness", "cases", "costs", "oracles")
#: What starts a process besides harness.core.proc: the module subprocess, os's spawning calls, pty's.
_OS_SPAWNING = ("system", "popen", "spawn", "posix_spawn", "exec", "fork")
_MODULES = {"subprocess": (), "os": _OS_SPAWNING, "pty": ("spawn", "fork"), "asyncio": ("create_subprocess",)}


def _spawning(module: str, name: str) -> bool:
    return module in _MODULES and (not _MODULES[module] or name.startswith(_MODULES[module]))


def direct_process_calls(text: str) -> list[tuple[int, str]]:
    """(line, what) of every import of ``subprocess`` and every use of a process-starting call of os,
    pty or asyncio (imported as a module or by name) in Python source ``text``."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, f"import {a.name}") for a in node.names if a.name.split(".")[0] == "subprocess"]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names
                    if _spawning(node.module.split(".")[0], a.name)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _spawning(node.value.id, node.attr):
            out.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return sorted(out)


def test_no_module_but_proc_starts_a_process() -> None:
    wrong = []
    for top in SCANNED:
        for p in sorted((ROOT / top).rglob("*.py")):
            if p != DOOR:
                wrong += [f"{p.relative_to(ROOT)}:{line}: {what}" for line, what in direct_process_calls(p.read_text())]
    assert not wrong, ("processes are started through harness.core.proc (run: must succeed; execute: the exit "
                       "status is a verdict; Process: a long-lived child), which puts a timeout on every call:\n  "
                       + "\n  ".join(wrong))


def test_the_check_finds_every_way_in() -> None:
    src = ("import subprocess as sp\nfrom subprocess import run\nimport os\nos.system('x')\nos.popen('x')\n"
           "os.spawnl(0, 'x')\nos.execv('x', [])\nfrom os import posix_spawn\nimport pty\npty.spawn('x')\n"
           "import asyncio\nasyncio.create_subprocess_exec('x')\nos.path.join('a')\nos.environ.get('b')\n")
    assert [line for line, _ in direct_process_calls(src)] == [1, 2, 4, 5, 6, 7, 8, 10, 12]


# ------------------------------------------------------------------ one-shot commands

PY = sys.executable


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` is gone (or a zombie nobody reaped yet) within ``within`` seconds."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_bytes_in_and_out() -> None:
    data = bytes(range(256)) * 3
    r = execute([PY, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read()[::-1])"], input=data,
                text=False, timeout=60)
    assert r.ok and not r.timed_out and r.stdout == data[::-1] and r.stderr == b"" and r.seconds > 0


def test_text_is_decoded_with_errors_replaced() -> None:
    r = execute([PY, "-c", "import sys; sys.stdout.buffer.write(b'caf\\xc3\\xa9 \\xff')"], timeout=60)
    assert r.stdout == "café \ufffd"


def test_a_failure_is_a_result_not_an_exception() -> None:
    r = execute([PY, "-c", "import sys; print('said'); print('err', file=sys.stderr); sys.exit(3)"], timeout=60)
    assert (r.returncode, r.ok, r.timed_out, r.stdout, r.stderr) == (3, False, False, "said\n", "err\n")
    assert r.finished() is r  # it ended: only a timeout is raised by finished()
    with pytest.raises(CommandError, match=r"(?s)the step exited with code 3:.*argv: .*stdout:\n    said.*stderr:\n    err"):
        r.check("the step")


def test_run_raises_on_failure_and_returns_text_on_success(tmp_path: Path) -> None:
    log = tmp_path / "log"
    assert run([PY, "-c", "print('ok')"], timeout=60, log_file=log).stdout == "ok\n"
    assert "[exit 0]" in log.read_text()
    with pytest.raises(CommandError, match="building exited with code 2"):
        run([PY, "-c", "raise SystemExit(2)"], timeout=60, what="building")


def test_env_sets_and_removes_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RVVDIFF_TEST_GONE", "here")
    r = execute([PY, "-c", "import os; print(os.environ.get('RVVDIFF_TEST_SET'), os.environ.get('RVVDIFF_TEST_GONE'))"],
                env={"RVVDIFF_TEST_SET": "1", "RVVDIFF_TEST_GONE": None}, timeout=60)
    assert r.stdout.split() == ["1", "None"]


#: A child that starts a grandchild in its process group, says the grandchild's pid, and hangs.
HANGS_WITH_A_CHILD = ("import subprocess, sys, time\n"
                      "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
                      "print(g.pid, flush=True)\n"
                      "time.sleep(120)\n")


def test_a_timeout_kills_the_child_and_its_process_group() -> None:
    t0 = time.monotonic()
    r = execute([PY, "-c", HANGS_WITH_A_CHILD], timeout=3)
    assert r.timed_out and r.returncode is None and r.timeout == 3
    assert time.monotonic() - t0 < 60
    grandchild = int(r.stdout.split()[0])  # the output before the timeout is kept
    assert _gone(grandchild), "the timed-out command's own child still runs"
    with pytest.raises(CommandError, match=r"the step timed out after 3 s"):
        r.finished("the step")
    with pytest.raises(CommandError, match=r"sleeping timed out after 1 s"):
        run([PY, "-c", "import time; time.sleep(60)"], timeout=1, what="sleeping")


# ------------------------------------------------------------------ long-lived processes

#: Answers each line with the line in capitals; ``quit`` ends it; ``mute`` makes it stop answering.
ECHO = ("import sys\n"
        "for line in sys.stdin:\n"
        "    if line == 'quit\\n': break\n"
        "    if line == 'mute\\n':\n"
        "        import time; time.sleep(120)\n"
        "    sys.stdout.write(line.upper()); sys.stdout.flush()\n")


def test_a_long_lived_process_answers_under_a_deadline() -> None:
    with Process([PY, "-c", ECHO]) as p:
        p.write(b"hello\nworld\n", deadline(30))
        assert p.readline(deadline(30)) == b"HELLO\n"
        assert p.read(3, deadline(30)) == b"WOR"  # what readline read beyond its line is not lost
        assert p.readline(deadline(30)) == b"LD\n"
        p.write(b"mute\n", deadline(30))
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            p.readline(deadline(1))
        assert 0.9 < time.monotonic() - t0 < 30
        assert p.alive()
        assert p.kill() == -9 and not p.alive()


def test_close_says_goodbye_and_reaps() -> None:
    p = Process([PY, "-c", ECHO])
    assert p.close(farewell=b"quit\n", grace=30) == 0
    assert p.poll() == 0


def test_close_kills_a_child_that_does_not_leave() -> None:
    p = Process([PY, "-c", "import time, sys; print('up', flush=True); time.sleep(120)"])
    assert p.readline(deadline(30)) == b"up\n"
    t0 = time.monotonic()
    assert p.close(grace=0.5) == -9
    assert time.monotonic() - t0 < 30


def test_the_end_of_its_output_is_eof() -> None:
    with Process([PY, "-c", "print('last')"]) as p:
        assert p.readline(deadline(30)) == b"last\n"
        assert p.readline(deadline(30)) == b""
        with pytest.raises(EOFError):
            p.read(1, deadline(30))
    assert p.returncode == 0


def test_a_with_block_left_by_an_error_kills_the_process_group() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with Process([PY, "-c", HANGS_WITH_A_CHILD]) as p:
            grandchild = int(p.readline(deadline(30)))
            raise RuntimeError("boom")
    assert p.returncode == -9
    assert _gone(grandchild)


def test_the_door_reexports_what_callers_catch() -> None:
    assert issubclass(proc.TimeoutExpired, proc.SubprocessError)
    assert proc.PIPE != proc.DEVNULL != proc.STDOUT
    assert os.path.samefile(DOOR, proc.__file__)
