"""Runs of ``llama-perplexity`` on a model and the fixed text, and what its ``--kl-divergence`` reports.

A reference run (``--kl-divergence-base FILE``) writes the tokens and every scored position's logits; a
run under test (``--kl-divergence-base FILE --kl-divergence``) reads them back and reports, as ggml's
maintainers read it: the mean KL divergence and its 99.9th percentile, the share of positions whose top
token is the same, and the perplexity ratio.  Each run is one command line (on this machine or under the
run's emulator: harness/model/machine.py), printed with its result so it replays by hand.
"""

from __future__ import annotations

import math
import re
import shlex
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.config import DATA_DIR
from harness.core.errors import RvvdiffError
from harness.model.machine import Host, Machine

#: The fixed text (public domain: the Gettysburg Address, 1863, and the opening of the Declaration of
#: Independence, 1776), shipped with rvvdiff.
TEXT = DATA_DIR / "model" / "text.txt"


class RunError(RvvdiffError):
    """llama-perplexity did not finish: crashed (with its signal), timed out, or printed no result."""

    def __init__(self, message: str, argv: Sequence[str], output: str = "", signal_number: int | None = None):
        self.argv, self.output, self.signal = list(argv), output, signal_number
        super().__init__(message)


#: ggml-cpu's switch for its graph fusion (``ggml_cpu_init``: fusion is off when it is 1).
FUSION_OFF = ("GGML_CPU_DISABLE_FUSION", "1")


@dataclass(frozen=True)
class Shape:
    """How much of the text a run evaluates and how: the context (``-c``, also the batch), the chunks,
    the threads, whether weights may be repacked (``-nr`` when not), whether ggml-cpu fuses ops
    (``GGML_CPU_DISABLE_FUSION=1`` when not: :attr:`env`)."""

    ctx: int = 64
    chunks: int = 2
    threads: int = 1
    repack: bool = True
    #: ggml-cpu's graph fusion (RMS_NORM + MUL on trees of 2026) on, as llama.cpp runs by default.  Off, the fused
    #: ops are computed one by one, as on trees without fusion: each by whatever claims it first (an extra buffer
    #: type's kernel, SpacemiT's forward_rms_norm_f32, which the fused path never reaches).
    fuse: bool = True

    @property
    def env(self) -> dict[str, str]:
        """The variables the run sets besides its build's (ggml-cpu reads ``GGML_CPU_DISABLE_FUSION`` once)."""
        return {} if self.fuse else {FUSION_OFF[0]: FUSION_OFF[1]}

    def args(self) -> list[str]:
        a = ["-c", str(self.ctx), "-b", str(self.ctx), "--chunks", str(self.chunks), "-t", str(self.threads)]
        return a + ([] if self.repack else ["-nr"])

    @property
    def tokens(self) -> int:
        return self.ctx * self.chunks

    @property
    def scored(self) -> int:
        """Positions whose logits are compared: in each chunk, those of the second half that have a next
        token (llama-perplexity scores tokens ctx/2 .. ctx-2 of each chunk)."""
        return (self.ctx - self.ctx // 2 - 1) * self.chunks

    def label(self) -> str:
        return (f"c{self.ctx}x{self.chunks}-t{self.threads}-{'repack' if self.repack else 'norepack'}"
                f"{'' if self.fuse else '-nofuse'}")


@dataclass(frozen=True)
class Kld:
    """What ``--kl-divergence`` printed.  llama-perplexity prints its statistics (percentiles, the
    perplexity of each side) only over 100 scored positions or more; a shorter run gives the running
    figures of its last chunk line (mean KLD, same top token, the log perplexity ratio), and the
    percentiles are None."""

    mean_kld: float
    same_top: float  # percent
    ppl_ratio: float
    ppl: float
    positions: int
    kld_999: float | None = None
    max_kld: float | None = None
    ppl_base: float | None = None
    seconds: float = 0.0
    tokens: int = 0
    argv: tuple[str, ...] = field(default=(), compare=False)
    #: The CPU backend library ggml loaded, from its log (``load_backend: loaded CPU backend from PATH``): a
    #: dispatch build's variant (``libggml-cpu-riscv64_v.so``); None: no such line (a static build loads none).
    loaded: str | None = None

    @property
    def loaded_variant(self) -> str | None:
        """The variant of :attr:`loaded` (``riscv64_v``), or None."""
        name = Path(self.loaded).name if self.loaded else ""
        return name.removeprefix("libggml-cpu-").removesuffix(".so") if name.startswith("libggml-cpu-") else None

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def line(self) -> str:
        p999 = f"{self.kld_999:.3g}" if self.kld_999 is not None else "n/a (under 100 positions)"
        variant = f", CPU variant {self.loaded_variant} loaded" if self.loaded_variant else ""
        return (f"same top token {self.same_top:.2f} %, mean KLD {self.mean_kld:.3g}, 99.9% KLD {p999}, "
                f"PPL ratio {self.ppl_ratio:.4f} ({self.positions} positions{variant})")

    def figures(self) -> list[tuple[str, float]]:
        """The run's figures as a test's report properties (harness/report/model_table.py reads them back
        from results.json)."""
        out = [("rvvdiff.model_top", self.same_top), ("rvvdiff.model_kld", self.mean_kld),
               ("rvvdiff.model_ppl_ratio", self.ppl_ratio), ("rvvdiff.model_tps", self.tokens_per_second)]
        return out + ([("rvvdiff.model_kld999", self.kld_999)] if self.kld_999 is not None else [])


_NUM = r"(-?(?:nan|inf|[0-9.]+(?:e[-+]?\d+)?))"
_SUMMARY = {
    "mean_kld": rf"Mean\s+KLD:\s*{_NUM}",
    "kld_999": rf"99\.9%\s+KLD:\s*{_NUM}",
    "max_kld": rf"Maximum KLD:\s*{_NUM}",
    "same_top": rf"Same top p:\s*{_NUM}",
    "ppl": rf"Mean PPL\(Q\)\s*:\s*{_NUM}",
    "ppl_base": rf"Mean PPL\(base\)\s*:\s*{_NUM}",
    "ppl_ratio": rf"Mean PPL\(Q\)/PPL\(base\)\s*:\s*{_NUM}",
}
_PM = rf"{_NUM}\s*±\s*{_NUM}"
#: What makes llama.cpp's tools print ggml's INFO lines, among them which backend library it loaded: common/log.cpp
#: ranks ggml's INFO as its verbosity 4 (``LOG_LEVEL_TRACE``), above the tools' default threshold of 3.
LOG_LOADS = ("-lv", "4")
#: ggml's log line naming the CPU backend library it loaded (ggml-backend-reg.cpp's ``load_backend``).
_LOADED = re.compile(r"loaded CPU backend from (\S+)")
#: A line of the running table: chunk, PPL, ln(PPL(Q)/PPL(base)), KLD, RMS Δp %, same top p %.
_CHUNK = re.compile(rf"^\s*(\d+)\s+{_PM}\s+{_PM}\s+{_PM}\s+{_PM}\s*%\s+{_PM}\s*%\s*$", re.M | re.I)


def parse_kld(output: str, scored_per_chunk: int) -> Kld | None:
    """The figures of a ``--kl-divergence`` run's output, or None when it printed none of them."""
    rows = _CHUNK.findall(output)
    if not rows:
        return None
    last = rows[-1]
    chunks = int(last[0])
    got: dict[str, float | int | None] = {
        "ppl": float(last[1]), "ppl_ratio": math.exp(float(last[3])), "mean_kld": float(last[5]),
        "same_top": float(last[9]), "positions": chunks * scored_per_chunk}
    summary = {k: re.search(p, output, re.I) for k, p in _SUMMARY.items()}
    if all(summary.values()):
        got.update({k: float(m.group(1)) for k, m in summary.items()})
    return Kld(**got)


def _explain(argv: list[str], returncode: int | None, output: str, what: str) -> RunError:
    replay = shlex.join(argv)
    tail = "\n".join(output.rstrip().splitlines()[-15:])
    if returncode is None:
        return RunError(f"{what} did not finish in time (killed); replay: {replay}\n{tail}", argv, output)
    sig = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else None
    if sig:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        hint = " (an instruction the emulated CPU lacks)" if sig == signal.SIGILL else ""
        return RunError(f"{what} crashed with {name}{hint}; replay: {replay}\n{tail}", argv, output, sig)
    return RunError(f"{what} exited with code {returncode}; replay: {replay}\n{tail}", argv, output)


def invoke(on: Host | Machine, tool: Path, model: Path, args: Sequence[str], *, timeout: float,
           what: str, env: Mapping[str, str] | None = None) -> tuple[str, float, list[str]]:
    """Run ``tool -m model *args`` on ``on`` (this machine, or a riscv64 target under the run's emulator);
    return its output, seconds and the words that replay it (its argv, after ``env NAME=VALUE`` when the build
    or ``env`` needs an environment); :class:`RunError` when it does not finish cleanly."""
    t0 = time.monotonic()
    r = on.run(tool, ["-m", str(model), *args], timeout=timeout, what=what, env=env)
    if r.returncode != 0:
        raise _explain(r.replay, r.returncode, r.output, what)
    return r.output, time.monotonic() - t0, r.replay


def base_args(shape: Shape, base_file: Path, text: Path = TEXT) -> list[str]:
    """The reference run: evaluate the text and save its tokens and logits to ``base_file``."""
    return ["-f", str(text), *shape.args(), "--no-warmup", "--kl-divergence-base", str(base_file)]


def kld_args(shape: Shape, base_file: Path) -> list[str]:
    """The run under test: the tokens and logits of ``base_file`` against this build's."""
    return [*shape.args(), "--no-warmup", "--kl-divergence-base", str(base_file), "--kl-divergence"]


def measure(on: Host | Machine, tool: Path, model: Path, shape: Shape, base_file: Path, *, timeout: float,
            what: str, extra: Sequence[str] = ()) -> Kld:
    """The figures of ``tool`` (a llama-perplexity) on ``on`` against the logits of ``base_file``; ``extra``: more
    arguments (:data:`LOG_LOADS`)."""
    out, secs, argv = invoke(on, tool, model, [*kld_args(shape, base_file), *extra], timeout=timeout, what=what,
                             env=shape.env)
    k = parse_kld(out, shape.scored // shape.chunks)
    if k is None:
        raise RunError(f"{what} finished but printed no KL-divergence figures; replay: {shlex.join(argv)}\n"
                       + "\n".join(out.rstrip().splitlines()[-15:]), argv, out)
    loaded = _LOADED.findall(out)
    return Kld(**{**k.__dict__, "seconds": secs, "tokens": shape.tokens, "argv": tuple(argv),
                  "loaded": loaded[-1] if loaded else None})
