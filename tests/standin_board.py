"""The stand-in board of the board tests: an sshd on 127.0.0.1 whose "board" runs riscv64 programs
through qemu-riscv64 at a fixed CPU (no RISC-V hardware here, and no binfmt handler: those are the
host kernel's global state).

The sshd is the system's (``/usr/sbin/sshd``, package openssh-server; ci/setup.sh installs it) with a
configuration, host key and authorized key of its own in a temporary directory, run with ``-D -e`` in
the background and killed at the end.  Its ``ForceCommand`` is :data:`BOARD_SH`: the command the
harness sends to start a program (``... && exec PROGRAM``) gets ``qemu-riscv64 -cpu CPU`` put before the
program, any other command (copying, ``test -x``, ``kill``) runs as sent.  ``--emulator native`` is
tested with the same qemu command as ``RVVDIFF_NATIVE_LAUNCHER``.
"""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"
#: The stand-in board's CPU: VLEN 256 with zvfh, without zvfbfwma (so one ISA build is skipped as lacking).
VLEN = 256
CPU = "rv64,v=true,vlen=256,elen=64,zfh=true,zfhmin=true,zvfh=true,zvfhmin=true"
HOST = "standin"

BOARD_SH = """#!/bin/sh
# The stand-in board: a program the harness starts ("... && exec PROGRAM") runs under qemu-riscv64.
c=$SSH_ORIGINAL_COMMAND
case $c in
  *"&& exec "*) c=$(printf '%s' "$c" | sed "s|&& exec |\\&\\& exec {launcher} |") ;;
esac
exec /bin/sh -c "$c"
"""


def missing() -> str | None:
    """Why the stand-in board cannot run here (with what to do), or None."""
    if not os.path.exists(SSHD) or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return (f"{SSHD}, ssh or ssh-keygen is missing: install openssh-server and openssh-client "
                "(ci/setup.sh does: apt-get install openssh-server)")
    return None


def launcher(qemu: str, cpu: str = CPU) -> str:
    """The command that runs a riscv64 program on the stand-in board's CPU."""
    return f"{qemu} -cpu {cpu}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class StandIn:
    """A running stand-in board."""

    dir: Path
    port: int
    proc: subprocess.Popen[bytes]
    ssh: str  # the value of RVVDIFF_SSH that reaches it as HOST

    @property
    def remote_dir(self) -> Path:
        return self.dir / "remote"

    def spec(self) -> str:
        return f"ssh:{HOST}:{self.remote_dir}"

    def sessions(self) -> list[int]:
        """The pids of sshd's per-connection processes (the listener's sshd descendants: the privileged
        monitor and the session process that holds the connection)."""
        rows = subprocess.run(["ps", "-eo", "pid=,ppid=,comm="], capture_output=True, text=True).stdout.split("\n")
        children: dict[int, list[tuple[int, str]]] = {}
        for row in rows:
            if len(parts := row.split(None, 2)) == 3:
                children.setdefault(int(parts[1]), []).append((int(parts[0]), parts[2]))
        found, todo = [], [self.proc.pid]
        while todo:
            for pid, comm in children.get(todo.pop(), []):
                if comm.startswith("sshd"):
                    found.append(pid)
                    todo.append(pid)
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start(base: Path, qemu: str, cpu: str = CPU) -> StandIn:
    """Start the stand-in board's sshd in ``base``; raises RuntimeError (with sshd's log) when it does not come up."""
    base.mkdir(parents=True, exist_ok=True)
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / key)], check=True)
    shutil.copy(base / "client_key.pub", base / "authorized_keys")
    board_sh = base / "board.sh"
    board_sh.write_text(BOARD_SH.replace("{launcher}", launcher(qemu, cpu)))
    board_sh.chmod(0o755)
    port = _free_port()
    (base / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {base / 'host_key'}\nPidFile {base / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {base / 'authorized_keys'}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"UsePAM no\nStrictModes no\nPermitRootLogin yes\nForceCommand {board_sh}\nMaxStartups 50\nMaxSessions 50\n")
    (base / "ssh_config").write_text(
        f"Host {HOST}\n  HostName 127.0.0.1\n  Port {port}\n  User {getpass.getuser()}\n"
        f"  IdentityFile {base / 'client_key'}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
        f"  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    log = (base / "sshd.log").open("wb")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(base / "sshd_config")], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    board = StandIn(base, port, proc, f"ssh -F {shlex.quote(str(base / 'ssh_config'))}")
    for _ in range(100):
        if proc.poll() is not None:
            break
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return board
        time.sleep(0.1)
    board.stop()
    raise RuntimeError(f"the stand-in board's sshd did not start: {(base / 'sshd.log').read_text()[-1000:]}")
