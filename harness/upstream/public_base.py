"""What every public form of a failure report is (harness/upstream/public.py's ``MulMat``, harness/upstream/public_ops.py's
``OpGraph`` and ``FlashAttn``): the base record, the exception of a call with none, why a SpacemiT kernel the case
calls directly has none (:data:`SPACEMIT_DIRECT`, which harness/upstream/spacemit_direct.py's texts quote too), and the
oracle's values and bounds of the recorded comparison."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.report.failure import Case

#: Why a SpacemiT kernel the case calls directly has no public form, by the kernel server's adapter (docs/spacemit.md).
SPACEMIT_DIRECT = {
    "spacemit_quantize": "the case calls one of SpacemiT's activation quantizers (spacemit/rvv_kernels.cpp) directly; "
                         "ggml calls them only inside the IME GEMMs of MUL_MAT, with the weights in SpacemiT's buffer "
                         "type on an IME core (the K1's A60, the A100), which no QEMU emulates: under QEMU the backend "
                         "runs as an X60 (SPACEMIT_CORE_ARCH=0x503C) and no op reaches the quantizers",
    "spacemit_repack": "the case calls one of SpacemiT's weight layouts (spacemit/repack.cpp) directly; ggml builds it "
                       "only when a weight goes to SpacemiT's buffer type on an IME core (IME1: the A60; the 32-row "
                       "layouts: the A100's IME2, which no public assembler builds), and only the IME GEMM reads it: "
                       "no QEMU emulates IME",
    "spacemit_repack_uncalled": "the case calls a weight layout of spacemit/repack.cpp that the tree defines and never "
                                "calls: no op reaches it",
    "repack_mul_mat": "the weights went to SpacemiT's buffer type (CPU_RISCV64_SPACEMIT), where MUL_MAT runs the IME1 "
                      "GEMM of an A60 core: only Spike with rvvdiff's IME1 library runs it (bare metal), no QEMU "
                      "emulates IME, and a Linux program under QEMU runs ggml's own vec_dot on the same call",
    "spacemit_fa": "the case calls SpacemiT's flash-attention kernel with a block of TCM, as ime.cpp does on boards with "
                   "SpacemiT's TCM runtime (libspine_tcm); through ggml under QEMU there is no TCM, and without it the "
                   "kernel's 2- and 4-row paths never run",
}


class NoPublicForm(Exception):
    """The recorded call has no equivalent through ggml's public API (the message says why)."""


@dataclass(kw_only=True)
class Public:
    """The failing call as a public ggml graph: what every form has (:class:`MulMat`; harness/upstream/public_ops.py's
    ``OpGraph`` and ``FlashAttn``).  A call that crashed where the test ran (:attr:`crashed`) is judged by whether the
    program dies too; its expected values are the oracle's where rvvdiff has it for the call's inputs, else None."""

    expected: np.ndarray | None  # the result's values in its memory order (None: not known, the program prints it)
    bound: np.ndarray | None  # per element (0: bitwise)
    #: What the program computes, in ggml's words (one line, a comment in the program).
    what: str = ""
    #: The function the case exists for (the title names it).
    function: str = ""
    #: Where the inputs come from (the issue text says it).
    inputs: str = "the inputs of a shrunk case"
    #: How the call ended where the test ran when it crashed (``SIGABRT``, ``SIGSEGV``; '' when it returned).
    signal: str = ""

    @property
    def crashed(self) -> bool:
        """The call crashed where the test ran: the program is judged by whether it dies too."""
        return bool(self.signal)


def expected_of(case: Case, size: int, fmt: str = "f32") -> tuple[np.ndarray, np.ndarray]:
    """The oracle's ``size`` values of the recorded comparison and each one's bound: 0 where it was bitwise, its
    absolute bound, or for a bound in ulps of the result's format ``fmt`` (``f32``, ``f16``) that many of its ulps
    at the expected value (oracles/ulp.py); NoPublicForm when the report has none."""
    comp = case.data.get("comparison") or {}
    if "expected" not in case.arrays:
        emu = case.data.get("target", {}).get("emulator", "qemu")
        said = [ln.strip() for ln in (case.call.get("server_message") or "").splitlines()
                if ln.strip() and "restarted" not in ln and not ln.startswith("***")]
        if emu != "qemu":
            raise NoPublicForm(f"the call crashes under {emu} only ({' '.join(said)[:400] or 'no result'}); the upstream "
                               "program compares numbers under QEMU, which does not show it")
        raise NoPublicForm("the report recorded no expected values (a crash or a path check): "
                           "the program would have nothing to compare with")
    exp = case.arrays["expected"].reshape(-1).astype(np.float64)
    if exp.size != size:
        raise NoPublicForm(f"the recorded expected values ({exp.size}) are not the {size} outputs of the graph")
    mode = comp.get("mode")
    if mode == "bitwise":
        bound = np.zeros(size)
    elif mode == "bound" and "bound" in case.arrays:
        bound = np.broadcast_to(case.arrays["bound"].astype(np.float64).reshape(-1), (size,)).copy()
    elif mode == "ulps" and "allowed" in case.arrays and fmt in ("f32", "f16"):
        from oracles.ulp import ulp

        allowed = np.broadcast_to(case.arrays["allowed"].astype(np.float64).reshape(-1), (size,))
        bound = np.nan_to_num(allowed * ulp(exp, fmt), nan=0.0)  # (an infinite or NaN value: equal or wrong)
    else:
        raise NoPublicForm(f"the comparison ({mode}) has no absolute bound the program can apply; "
                           "use `rvvdiff repro --c` for this one")
    return exp, bound
