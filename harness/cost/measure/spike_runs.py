"""One call measured under Spike by two runs of the kernel server (harness/cost/measure/spike_count.py's docstring says
what is counted and why): the runs, the check that run B executed at least what run A did at every address,
and the cache of measurements (``$RVVDIFF_CACHE/cost``, off with ``RVVDIFF_COST_CACHE=0``); and the same call's
memory traffic through a core's cache model, by two runs more (:func:`measure_traffic`,
harness/cost/measure/spike_traffic.py)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import struct
import tempfile
import warnings
from collections import Counter
from pathlib import Path

from harness.binary import elf
from harness.core import settings
from harness.core.config import cache_dir
from harness.core.proc import execute
from harness.cost.measure import snapshot
from harness.cost.measure.spike_count import TALLY_VERSION, Cost, CostError, image, second_estimate, tally
from harness.cost.measure.spike_traffic import Traffic, difference, parse_stats, split_output
from harness.cost.prices import cores, mca, memory_system
from harness.cost.prices.memory_system import MemorySystem
from harness.emulators import protocol as P
from harness.emulators.base import Emulator
from harness.emulators.spike import parse_histogram
from harness.toolchain.builds import Build


def _notes(message: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in message.splitlines() if "=" in line)


def spike_argv(emu: Emulator, exe: Path, vlen: int, props: dict[str, bool]) -> list[str]:
    """Spike with its PC histogram, without the real-time clock (nothing of the run depends on the host)."""
    argv = emu.command(exe, vlen, props)
    return [argv[0], "-g", *(a for a in argv[1:] if a != "--real-time-clint")]


def _run(argv: list[str], stream: bytes, timeout: float, what: str, exe: Path,
         emu: Emulator) -> tuple[list[P.Response], Counter[int], str]:
    """The run's responses, its PC histogram (with ``-g``) and the cache model's statistics (with ``--dc``...)."""
    # The requests come from a file, not a pipe: a pipe delivers them in pieces that depend on the
    # host's timing, and the server's read loop (counted in the histogram) with them.
    with tempfile.TemporaryFile() as f:
        f.write(stream)
        f.seek(0)
        cp = execute(argv, stdin=f, text=False, timeout=timeout)
    if cp.timed_out:
        raise CostError(f"{what}: no answer within {timeout:.0f} s under Spike (a hang, or raise "
                        "--kernel-timeout for a call this large)")
    hist, rest = parse_histogram(cp.stderr.decode(errors="replace"))
    out, stats = split_output(cp.stdout)
    try:
        responses = P.decode_responses(out)
    except (ValueError, struct.error) as e:
        responses = []
        rest += f"\n(unreadable answer: {e})"
    rc = emu.signal_of(cp.returncode)
    if rc != 0 or len(responses) < 2:
        tail = emu.explain(exe, rest.strip()[-1500:])
        how = f"died of signal {-rc}" if rc < 0 else f"exited with code {rc}"
        raise CostError(f"{what}: the kernel server {how} under Spike before answering"
                        + (f"\n  server stderr: {tail}" if tail else ""))
    return responses, hist, stats


def measure(emu: Emulator, build: Build, vlen: int, call: tuple[str, list[int], list[float], list[P.Buf]],
            *, timeout: float, what: str = "") -> tuple[P.Response, Cost]:
    """Measure one call (kernel, ip, fp, bufs) of ``build`` at ``vlen`` (module docstring); returns the
    response of the warm call and its :class:`Cost`.  Raises :class:`CostError` naming what failed."""
    kernel, ip, fp, bufs = call
    what = what or f"{kernel} (VLEN {vlen}, ISA build {build.isa.name}, on Spike)"
    exe = emu.server_binary(build)
    argv = spike_argv(emu, exe, vlen, dict(build.isa.qemu))
    key = _cache_key(exe, argv, P.encode_call(kernel, ip, fp, bufs))
    want_mca = vlen == mca.VLEN and mca.tools() is not None
    kept = _cached(key, need_mix=vlen in cores.vlens(), need_mca=want_mca)
    if kept is not None:
        return kept
    argv = _started(argv, exe, timeout)

    def pair(repeats: tuple[int, int]) -> tuple[P.Response, Counter[int], list[int], int]:
        """Runs A and B repeating the call ``repeats`` times: B's response, the histogram difference, the
        addresses where B executed fewer instructions than A, and how many fewer in all."""
        runs = []
        for repeat in repeats:
            r, hist, _ = _answered(argv, _stream(call, repeat), timeout, what, exe, emu)
            runs.append((r, hist))
        (_, hist_a), (r_b, hist_b) = runs
        diff: Counter[int] = Counter()
        for pc, n in hist_b.items():
            d = n - hist_a.get(pc, 0)
            if d:
                diff[pc] = d
        fewer = [pc for pc, n in diff.items() if n < 0] + [pc for pc in hist_a if pc not in hist_b]
        return r_b, diff, fewer, sum(-diff[pc] if pc in diff else hist_a[pc] for pc in fewer)

    r_b, diff, fewer, short = pair((1, 2))
    if fewer:
        # The first call can leave state that sends the next one down another path (glibc's heap after a call
        # that frees large buffers): then the warm repetition is measured past it, the third against the second.
        r_b3, diff3, fewer3, _ = pair((2, 3))
        if not fewer3:
            r_b, diff, fewer = r_b3, diff3, []
    if fewer:
        img = image(exe)
        where = sorted({elf.base_symbol(f[1]) if (f := img.function_of(pc)) else hex(pc) for pc in fewer})
        raise CostError(f"{what}: run B executed fewer instructions than run A at {len(fewer)} addresses, {short} "
                        f"in all (in {', '.join(where[:6])}), both after one call and after two: the call is not "
                        "deterministic (it depends on the host or on time), or each run leaves state that changes "
                        "what happens after it")
    notes = _notes(r_b.message)
    if "cost.instret" not in notes:
        raise CostError(f"{what}: the kernel server did not note its counters (a server built before the "
                        "cost measure? rebuild with `rvvdiff build`)")
    cost = tally(image(exe), diff, int(notes["cost.instret"]), int(notes["cost.cycles"]))
    if want_mca:
        cost = dataclasses.replace(cost, mca=second_estimate(exe, image(exe), diff))
    result = r_b, cost
    _keep(key, *result)
    return result


def _stream(call: tuple[str, list[int], list[float], list[P.Buf]], repeat: int) -> bytes:
    kernel, ip, fp, bufs = call
    return P.encode_hello() + P.encode_call(kernel, ip, fp, bufs, repeat, measure=True) + P.encode_quit()


def _answered(argv: list[str], stream: bytes, timeout: float, what: str, exe: Path,
              emu: Emulator) -> tuple[P.Response, Counter[int], str]:
    """:func:`_run` of a one-call stream: the call's response (an error unless OK), the histogram, the statistics."""
    responses, hist, stats = _run(argv, stream, timeout, what, exe, emu)
    r = responses[1]
    if r.status != P.Status.OK:
        raise CostError(f"{what}: the kernel server answered {P.Status(r.status).name}: {r.message}")
    return r, hist, stats


def measure_traffic(emu: Emulator, build: Build, vlen: int, call: tuple[str, list[int], list[float], list[P.Buf]],
                    system: MemorySystem, *, timeout: float, what: str = "") -> Traffic:
    """The memory traffic of one warm call (kernel, ip, fp, bufs) of ``build`` at ``vlen`` through ``system``'s
    cache model (harness/cost/measure/spike_traffic.py): run B's counters (two repetitions) minus run A's (one).
    Raises :class:`CostError` when the call fails or ``system`` publishes no cache."""
    what = what or f"{call[0]} (VLEN {vlen}, ISA build {build.isa.name}, on Spike's {system.core} cache model)"
    options = system.spike_options()
    if not options:
        raise CostError(f"{what}: {system.core} has no published caches (harness/data/cost/memory.toml)")
    exe = emu.server_binary(build)
    started = _started(spike_argv(emu, exe, vlen, dict(build.isa.qemu)), exe, timeout)  # the measure's snapshot
    argv = [started[0], *options, *started[1:]]
    stats = [parse_stats(_answered(argv, _stream(call, repeat), timeout, what, exe, emu)[2]) for repeat in (1, 2)]
    if not stats[1]:
        raise CostError(f"{what}: Spike printed no cache statistics (a Spike without --dc / --l2?)")
    return difference(stats[0], stats[1], system.core, system.caches["l1d"].line)


def traffic_at(emu: Emulator, build: Build, vlen: int, call: tuple[str, list[int], list[float], list[P.Buf]], *,
               timeout: float, what: str = "", only: frozenset[str] | None = None) -> dict[str, dict]:
    """:func:`measure_traffic` through every core priced at ``vlen`` whose caches are published (``only``: those of
    these core keys), by core key."""
    systems = memory_system.systems()
    return {c.key: measure_traffic(emu, build, vlen, call, systems[c.key], timeout=timeout, what=what).as_dict()
            for c in cores.for_vlen(vlen)
            if c.key in systems and systems[c.key].spike_options() and (only is None or c.key in only)}


def _started(argv: list[str], exe: Path, timeout: float) -> list[str]:
    """``argv`` running the server's start-up snapshot instead of the server (harness/cost/measure/snapshot.py):
    the same counts without ggml's start-up in each of the two runs.  Without one (RVVDIFF_COST_SNAPSHOT=0,
    or it could not be taken: said once as a warning), ``argv`` itself."""
    if settings.get("COST_SNAPSHOT") == "0":
        return argv
    try:
        return [*argv[:-1], str(snapshot.resume_image(argv, exe, timeout=timeout))]
    except snapshot.SnapshotError as e:
        warnings.warn(f"cost: no start-up snapshot for {exe} ({e}); every run starts the server afresh", stacklevel=2)
        return argv


# ------------------------------------------------------------------ the cache


def _cache_key(exe: Path, argv: list[str], request: bytes) -> str | None:
    """What a measurement depends on: the server binary (its path names the digest of its objects; size
    and mtime guard a relink), Spike and its options, the request's bytes, and what the tally makes of the
    histogram (:data:`TALLY_VERSION`).  None: no cache."""
    if settings.get("COST_CACHE") == "0":
        return None
    st = exe.stat()
    h = hashlib.sha256(f"{exe}|{st.st_size}|{st.st_mtime_ns}|{' '.join(argv[:-1])}|tally {TALLY_VERSION}".encode())
    h.update(request)
    return h.hexdigest()


def _cache_file(key: str) -> Path:
    return cache_dir() / "cost" / key[:2] / f"{key}.json"


def _cached(key: str | None, *, need_mix: bool = False, need_mca: bool = False) -> tuple[P.Response, Cost] | None:
    """A kept measurement, or None.  ``need_mix``: one without an instruction mix (kept by an rvvdiff that
    did not record it) does not count, so that the VLENs a core's prices apply to get their estimate."""
    if key is None:
        return None
    try:
        d = json.loads(_cache_file(key).read_text())
        if (need_mix and not d["cost"].get("mix")) or (need_mca and not d["cost"].get("mca")):
            return None
        r = P.Response(P.Status(d["status"]), d["kernel_ns"], d["message"], [base64.b64decode(o) for o in d["outputs"]])
        return r, Cost(**d["cost"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _keep(key: str | None, r: P.Response, c: Cost) -> None:
    if key is None:
        return
    f = _cache_file(key)
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"status": int(r.status), "kernel_ns": r.kernel_ns, "message": r.message,
                               "outputs": [base64.b64encode(o).decode() for o in r.outputs], "cost": c.as_dict()}))
    tmp.replace(f)


