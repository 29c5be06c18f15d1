"""The public forms of one op and of flash attention: the kernel server's ``op`` and ``attention`` calls as ggml graphs.

In the spacemit build (docs/spacemit.md) SpacemiT's backend claims NORM, RMS_NORM, ADD / SUB / MUL / DIV, CONT, CPY,
REPEAT, SUM_ROWS, GET_ROWS and CONCAT for every graph, and FLASH_ATTN_EXT at VLEN 1024: its RVV kernels are reached
through ggml's public ops.  The kernel server's adapters build them (harness/server/k_ops.cpp: one op on sources
that may be permuted views; attention.h: ``ggml_flash_attn_ext`` of Q, K, V, a mask and sinks), so a failure of
cases/test_spacemit_ops.py or test_spacemit_fa.py has a public form: the same op on the same shapes, views, types and
bytes (:class:`OpGraph`, :class:`FlashAttn`), which harness/upstream/program_ops.py writes as a program.  The same
forms serve ggml-cpu's own builds, where the op runs ggml's kernels.

A call that crashed where the test ran (the f16 concat's abort, the decode's null mask) recorded no result: the
program's run is the verdict (it dies or not); an op's expected values are then its oracle's on the recorded inputs
(cases/spacemit_ops.py), as for a call the server stopped for writing past its result (the comparison a report
keeps then is an earlier call's), attention's unknown (the program prints its first values).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from harness.report.failure import Case
from harness.upstream.public_base import NoPublicForm, Public, expected_of
from oracles.ggml_ops import permuted_ne

#: k_ops.cpp's op numbers and the ggml function of each (cases/spacemit_ops.py's ``OPS`` names them alike).
OP_NAMES = ("norm", "rms_norm", "add", "sub", "mul", "div", "cont", "cpy", "repeat", "sum_rows", "get_rows", "concat")
#: The fields of one source in an ``op`` call: type, ne0-3, the permutation p0-3.
_SRC_FIELDS = 9
#: The signals a crashed call's report names (the server's message, the failure's text).
_SIGNALS = re.compile(r"\b(SIGABRT|SIGSEGV|SIGBUS|SIGILL|SIGFPE)\b")


@dataclass
class Source:
    """One source of an op: its storage (ggml type name, ``ne``, its bytes) seen through ``ggml_permute(perm)``
    (the identity: the tensor itself)."""

    type: str
    ne: tuple[int, int, int, int]
    perm: tuple[int, int, int, int]
    data: bytes

    @property
    def view_ne(self) -> tuple[int, ...]:
        """The shape the op sees (ggml_permute moves storage axis i to ``perm[i]``)."""
        return permuted_ne(self.ne, self.perm)

    def words(self) -> str:
        """``f32 [2, 1, 1, 1]``, or ``ggml_permute(f32 [2, 1, 1, 1], 1, 0, 2, 3)`` for a view."""
        t = f"{self.type} {list(self.ne)}"
        return t if self.perm == (0, 1, 2, 3) else f"ggml_permute({t}, {', '.join(map(str, self.perm))})"


@dataclass
class OpGraph(Public):
    """The failing call as ``C = ggml_<op>(sources...)`` (``cpy``: into a new ``dst_type`` tensor of the source's
    shape), computed on ``threads`` threads; ``expected``: C's values in its memory order."""

    op: str
    sources: list[Source]
    dst_type: str
    iparams: tuple[int, ...] = ()
    fparams: tuple[float, ...] = ()
    threads: int = 1


@dataclass
class FlashAttn(Public):
    """The failing call as ``ggml_flash_attn_ext(Q, K, V, mask, scale, max_bias, softcap)`` (with sinks when
    given): Q ``[heads][n_q][dk]`` f32, K ``[kv_heads][n_kv][dk]`` and V ``[kv_heads][n_kv][dv]`` of their
    types, the mask ``[mask_heads][n_q][n_kv]`` f16 (none when ``mask_heads`` is 0), sinks ``[heads]`` f32 (none
    when empty); the result ``[n_q][heads][dv]`` f32."""

    k_type: str
    v_type: str
    dk: int
    dv: int
    n_q: int
    n_kv: int
    heads: int
    kv_heads: int
    mask_heads: int
    threads: int
    scale: float
    max_bias: float
    softcap: float
    q: bytes = field(repr=False, default=b"")
    k: bytes = field(repr=False, default=b"")
    v: bytes = field(repr=False, default=b"")
    mask: bytes = field(repr=False, default=b"")
    sinks: bytes = field(repr=False, default=b"")


def crash_signal(case: Case) -> str:
    """The signal the call died of where the test ran ('' when the report names none)."""
    m = _SIGNALS.search(case.call.get("server_message") or "")  # (the kernel server's pool names the signal)
    return m.group(1) if m else ""


def _result(case: Case, size: int, fmt: str) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    """(expected, bound, signal): the comparison's, or none when the call crashed where the test ran."""
    if "expected" not in case.arrays and case.data.get("target", {}).get("emulator", "qemu") == "qemu":
        sig = crash_signal(case)
        if sig:
            return None, None, sig
    exp, bound = expected_of(case, size, fmt)
    return exp, bound, ""


def _ended_early(case: Case) -> bool:
    """The call returned no result where the test ran: it crashed, or the server found a write outside a buffer
    (a comparison the report kept then belongs to an earlier call of the test)."""
    return bool(crash_signal(case)) or "wrote outside" in (case.call.get("server_message") or "")


def _op_oracle(op: str, srcs: list[Source], dst: str, par: tuple[int, ...], fp: tuple[float, ...]
               ) -> tuple[np.ndarray, np.ndarray]:
    """The op's expected values and bound from the recorded inputs, by the test's own oracle (cases/spacemit_ops.py),
    for a call that returned no result: exact ops bound 0, mixed formats 1 ulp of the result's format, as the test."""
    from cases import spacemit_ops as SO
    from oracles import ggml_ops as GO
    from oracles.ulp import ulp

    stored = [np.frombuffer(s.data, SO.NP_TYPE[s.type]).reshape(tuple(reversed(s.ne))) for s in srcs]
    ids = tuple(int(v) for v in stored[1].reshape(-1)) if op == "get_rows" else ()
    case = SO.OpCase(op, tuple(SO.Src(s.type, s.ne, s.perm) for s in srcs), dst, par, fp, ids=ids)
    exp, bound = SO.oracle(case, [GO.permute(x, s.perm) for x, s in zip(stored, srcs, strict=True)])
    exp = np.asarray(exp, np.float64).reshape(-1)
    if bound is not None:
        return exp, np.broadcast_to(np.asarray(bound, np.float64).reshape(-1), exp.shape).copy()
    mixed = op in GO.BINARY and len({s.type for s in srcs} | {dst}) > 1
    return exp, (np.nan_to_num(ulp(exp, dst), nan=0.0) if mixed else np.zeros(exp.size))


def _op_form(case: Case, tree, function: str) -> OpGraph:
    ip, fp = [int(v) for v in case.call.get("ip", [])], [float(v) for v in case.call.get("fp", [])]
    if len(ip) < 5 or not 0 <= ip[0] < len(OP_NAMES):
        raise NoPublicForm(f"the op call's parameters ({ip[:5]}) name no op of harness/server/k_ops.cpp")
    code, threads, dst_id, n_src, n_par = ip[:5]
    op, dst = OP_NAMES[code], tree.name(dst_id, "op")
    srcs = []
    for i in range(n_src):
        f = ip[5 + _SRC_FIELDS * i:5 + _SRC_FIELDS * (i + 1)]
        buf = case.arrays.get(f"buf{i}")
        if buf is None:
            raise NoPublicForm(f"the report kept no bytes of the op's source {i}")
        srcs.append(Source(tree.name(f[0], "op"), tuple(f[1:5]), tuple(f[5:9]), buf.tobytes()))
    par = tuple(ip[5 + _SRC_FIELDS * n_src:5 + _SRC_FIELDS * n_src + n_par])
    out = case.call["buffers"][n_src]["size"]
    size = out // {"f32": 4, "f16": 2, "i32": 4}.get(dst, 4)
    if _ended_early(case) and all(s.type in ("f32", "f16", "i32") for s in srcs):
        exp, bound = _op_oracle(op, srcs, dst, par, tuple(fp))
        sig = crash_signal(case)
        if exp.size != size:
            raise NoPublicForm(f"the op's oracle gives {exp.size} values for its {size} outputs")
    else:
        exp, bound, sig = _result(case, size, dst if dst in ("f32", "f16") else "")
    shapes = " and ".join(s.words() for s in srcs)
    extra = {"norm": f", eps {fp[0]:g}" if fp else "", "rms_norm": f", eps {fp[0]:g}" if fp else "",
             "repeat": f" to {list(par)}", "concat": f" along dim {par[0]}" if par else ""}.get(op, "")
    return OpGraph(op=op, sources=srcs, dst_type=dst, iparams=par, fparams=tuple(fp), threads=threads, expected=exp,
                   bound=bound, signal=sig, function=function or f"ggml_{op}",
                   what=f"ggml_{op} of {shapes}{extra} -> {dst}, on {threads} thread{'s' * (threads > 1)}")


def _attention_form(case: Case, tree, function: str) -> FlashAttn:
    ip, fp = [int(v) for v in case.call.get("ip", [])], [float(v) for v in case.call.get("fp", [])]
    if len(ip) != 11 or len(fp) != 3:
        raise NoPublicForm(f"the attention call's parameters ({len(ip)} integers, {len(fp)} floats) are not "
                           "harness/server/k_graph.cpp's")
    fused, tk, tv, dk, dv, n_q, n_kv, h, h_kv, mask_heads, threads = ip
    if fused != 1:
        raise NoPublicForm("the failing call is the materialised attention (mul_mat, soft_max_ext, mul_mat), the "
                           "test's second opinion; only the fused ggml_flash_attn_ext is written as a program")
    bufs = [case.arrays.get(f"buf{i}", np.zeros(0, np.uint8)).tobytes() for i in range(5)]
    exp, bound, sig = _result(case, n_q * h * dv, "f32")
    k_type, v_type = tree.name(tk, "attention"), tree.name(tv, "attention")
    mask = f"a mask of {mask_heads} head{'s' * (mask_heads > 1)}" if mask_heads else "no mask"
    return FlashAttn(k_type=k_type, v_type=v_type, dk=dk, dv=dv, n_q=n_q, n_kv=n_kv, heads=h, kv_heads=h_kv,
                     mask_heads=mask_heads, threads=threads, scale=fp[0], max_bias=fp[1], softcap=fp[2],
                     q=bufs[0], k=bufs[1], v=bufs[2], mask=bufs[3], sinks=bufs[4], expected=exp, bound=bound,
                     signal=sig, function=function or "ggml_flash_attn_ext",
                     what=f"ggml_flash_attn_ext of {n_q} quer{'ies' if n_q > 1 else 'y'} over {n_kv} position"
                          f"{'s' * (n_kv > 1)}, DK {dk}, DV {dv}, {h} head{'s' * (h > 1)} over {h_kv} K/V head"
                          f"{'s' * (h_kv > 1)}, K {k_type} / V {v_type}, {mask}" + (", sinks" if bufs[4] else "")
                          + f", scale {fp[0]:g}, max_bias {fp[1]:g}, softcap {fp[2]:g}, on {threads} thread"
                          + "s" * (threads > 1))


def form(case: Case, tree, function: str) -> Public:
    """The public form of a recorded ``op`` or ``attention`` call (``tree``: the ggml types of the tree it ran
    against, harness/upstream/public.py's ``_Types``; ``function``: the op the comparison names, or '')."""
    kernel = case.call.get("kernel")
    if kernel == "op":
        return _op_form(case, tree, function)
    if kernel == "attention":
        return _attention_form(case, tree, function)
    raise NoPublicForm(f"the {kernel} call is neither an op nor attention")
