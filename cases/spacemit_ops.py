"""SpacemiT's RVV ops (ggml-cpu/spacemit/rvv_kernels.cpp) against NumPy, through ggml's public ops.

In the spacemit build the backend's extra buffer type claims NORM, RMS_NORM, ADD / SUB / MUL / DIV, CONT, CPY,
REPEAT, SUM_ROWS, GET_ROWS and CONCAT for every graph (``get_tensor_traits`` in spacemit/ime.cpp returns its RVV
traits whatever the buffers), and ``compute_forward`` takes each to its kernel when the op's types and layout
fit, else to ggml's generic one.  The kernel server's ``op`` adapter (harness/server/k_ops.cpp) builds one op
from sources that may be permuted views, so the tests reach both sides of every condition; :func:`route` is that
dispatch as ime.cpp writes it (the path each case takes, noted with the result).

Oracles and bounds (oracles/ggml_ops.py, derivations there): binary ops of one format and every copy are exact
(bit for bit); a binary op of mixed formats within 1 ulp of the reference's two roundings; rms_norm within
gamma(n + 6) |y|; norm within the bound of the reference's two-pass algorithm; sum_rows within gamma(n - 1) sum |x|.

Loops (docs/spacemit.md): norms and sum_rows walk a row in one vsetvl loop of e32m4, the binary ops src1's row
(ne10 elements, repeated ne00 / ne10 times) in e32m4 / e16m4, repeat in e32m4 / e16m4, get_rows copies a row with
``memcpy1d`` (VLEN 256: 1024-byte main loop and an e8m8 tail; VLEN 1024: 2048 bytes and an e8m2 tail; other
VLENs the C library).  Every run checks row lengths that cross each loop twice plus a remainder at its VLEN
and the widths of real models; Hypothesis draws the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import strategies as S
from cases.spacemit_tree import absent
from cases.vec_source import file_notes, rvv_paths, where
from harness.check import observe
from harness.check.compare import assert_all_within, assert_bitwise_equal, assert_within_ulps
from harness.emulators.protocol import In, Out
from harness.ggml.tree import Tree
from oracles import ggml_ops as GO
from oracles.ulp import ulp_error

#: ggml's type numbers (ggml.h) of what the adapter accepts.
GGML_TYPE = {"f32": 0, "f16": 1, "i32": 26}
NP_TYPE = {"f32": np.float32, "f16": np.float16, "i32": np.int32}
SIZE = {"f32": 4, "f16": 2, "i32": 4}
IDENTITY = (0, 1, 2, 3)
#: The file of the kernels (relative to the ggml directory).
FILES = ("src/ggml-cpu/spacemit/rvv_kernels.cpp",)
#: Real models' row widths (SmolLM2 576, Qwen3-0.6B 1024, Llama 2048 / 4096, FFN 1536 / 11008).
REAL_WIDTHS = (576, 1024, 1536, 2048, 4096)


@dataclass(frozen=True, repr=False)
class Op(S.KernelSpec):
    """One op of k_ops.cpp and the SpacemiT kernel behind it."""

    name: str
    code: int  # k_ops.cpp's op number
    kernel: str  # the spacemit/rvv_kernels.cpp function it reaches when ime.cpp's conditions hold
    sew_lmul: tuple[tuple[int, int], ...]  # the (SEW, LMUL) of its row loop(s)
    also: tuple[str, ...] = ()  # the other kernels ime.cpp's dispatch takes for the op (repeat: the dim-1 one)

    @property
    def requires(self) -> tuple[str, ...]:
        """The SpacemiT kernel(s) (a tree without the backend, or with other kernels, is "not in this tree"); the
        PR gate's call graph starts there, so a change to any of them is reached by the op's tests."""
        return (self.kernel, *self.also)


OPS: dict[str, Op] = {o.name: o for o in (
    Op("norm", 0, "forward_norm_f32", ((32, 4),)),
    Op("rms_norm", 1, "forward_rms_norm_f32", ((32, 4),)),
    Op("add", 2, "forward_binary", ((32, 4), (16, 4))),
    Op("sub", 3, "forward_binary", ((32, 4), (16, 4))),
    Op("mul", 4, "forward_binary", ((32, 4), (16, 4))),
    Op("div", 5, "forward_binary", ((32, 4), (16, 4))),
    Op("cont", 6, "forward_cont_with_permute", ()),  # loops: TRANSPOSE_LOOPS
    Op("cpy", 7, "forward_cpy_with_permute", ()),
    Op("repeat", 8, "forward_repeat_nrows", ((32, 4), (16, 4)), also=("forward_repeat_dim1",)),
    Op("sum_rows", 9, "forward_sum_rows", ((32, 4),)),
    Op("get_rows", 10, "forward_get_rows", ()),  # loops: MEMCPY_LOOPS
    Op("concat", 11, "forward_concat", ()),
)}


@dataclass(frozen=True)
class Src:
    """A source: its storage (type, ne) and the permutation it is seen through."""

    type: str
    ne: tuple[int, int, int, int]
    perm: tuple[int, int, int, int] = IDENTITY

    @property
    def view_ne(self) -> tuple[int, ...]:
        return GO.permuted_ne(self.ne, self.perm)


@dataclass(frozen=True)
class OpCase:
    """One call: the op, its sources, parameters, the dst type, the data's seed and kind, the threads."""

    op: str
    srcs: tuple[Src, ...]
    dst_type: str
    iparams: tuple[int, ...] = ()
    fparams: tuple[float, ...] = ()
    seed: int = 0
    kind: str = "normal"
    offset: float = 0.0  # added to every value of src0 (a norm's input far from zero mean)
    threads: int = 1
    ids: tuple[int, ...] = field(default=(), repr=False)  # get_rows' row ids (drawn with the case)


def _data(case: OpCase, i: int, s: Src) -> np.ndarray:
    """Source i's storage as a NumPy array (ggml order reversed)."""
    shape = tuple(reversed(s.ne))
    n = int(np.prod(shape))
    if s.type == "i32":
        return np.asarray(case.ids, np.int32).reshape(shape)
    x = S.float_array(n, s.type, case.kind, case.seed + 7919 * i)
    if i == 0 and case.offset:
        x = S.round_to(s.type, x + case.offset)
    return x.astype(NP_TYPE[s.type]).reshape(shape)


def route(case: OpCase) -> str:
    """The kernel ime.cpp's ``compute_forward`` gives the case (``tensor_traits_common``), as the tree writes its
    conditions, or ``generic`` (ggml's own).  On one source (its view) and the result."""
    s0 = case.srcs[0]
    t0, v0 = s0.type, s0.view_ne
    op = case.op
    if op in ("norm", "rms_norm"):
        return OPS[op].kernel  # F32 only, as the adapter builds them; the kernel asserts nb00 == 4
    if op in ("add", "sub", "mul", "div"):
        return f"forward_binary<{op}, {'float' if t0 == 'f32' else '_Float16'}>"
    if op in ("cont", "cpy"):
        if case.dst_type != t0:
            return "generic"
        nb = _view_nb(s0)
        dst_nb0 = SIZE[t0]
        if op == "cont":
            dst_nb2 = SIZE[t0] * v0[0] * v0[1]
            ok = dst_nb0 != nb[0] and dst_nb0 == nb[1] and v0[3] * v0[2] * dst_nb2 == v0[3] * v0[2] * nb[2]
        else:
            ok = dst_nb0 == nb[1] and nb[0] != nb[1]
        return OPS[op].kernel if ok else "generic"
    if op == "repeat":
        to = case.iparams
        rows_equal = int(np.prod(v0[1:])) == int(np.prod(to[1:]))
        if rows_equal and (v0[0] == 1 or v0[0] == to[0]):
            return "forward_repeat_nrows"
        if v0[1] == 1 and v0[0] == to[0]:
            return "forward_repeat_dim1"
        return "generic"
    if op == "sum_rows":
        return OPS[op].kernel
    if op == "get_rows":
        return OPS[op].kernel if case.dst_type == t0 and t0 in ("f32", "f16") else "generic"
    if op == "concat":
        return OPS[op].kernel if case.iparams[0] == 0 else "generic"
    raise ValueError(f"route: unknown op {op!r}")


def _view_nb(s: Src) -> tuple[int, ...]:
    """The byte strides of a source's view (its storage contiguous, then permuted)."""
    nb = [SIZE[s.type]]
    for d in range(3):
        nb.append(nb[-1] * s.ne[d])
    out = [0] * 4
    for i, p in enumerate(s.perm):
        out[p] = nb[i]
    return tuple(out)


def oracle(case: OpCase, views: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
    """(expected, bound or None for exact) of the op on its sources' views (harness/upstream/public_ops.py too)."""
    op, a = case.op, views[0]
    if op == "norm":
        return GO.norm(a.astype(np.float64), case.fparams[0])
    if op == "rms_norm":
        return GO.rms_norm(a.astype(np.float64), case.fparams[0])
    if op in GO.BINARY:
        return GO.binary(op, a, views[1], NP_TYPE[case.dst_type]), None
    if op in ("cont", "cpy"):
        return a.astype(NP_TYPE[case.dst_type]), None
    if op == "repeat":
        return GO.broadcast(a, tuple(reversed(case.iparams))), None
    if op == "sum_rows":
        return GO.sum_rows(a)
    if op == "get_rows":
        return GO.get_rows(a, views[1][0]).astype(NP_TYPE[case.dst_type]), None
    if op == "concat":
        return GO.concat(a, views[1], case.iparams[0]), None
    raise ValueError(f"oracle: unknown op {op!r}")


def check_op(case: OpCase, target, reps: int = 1) -> None:
    """Run the case's op at ``target`` and hold it against the oracle (exact or within the op's bound); the graph
    computed ``reps`` times after its one set-up (a cost measurement's repetitions: costs/spacemit_ops.py)."""
    op = OPS[case.op]
    stored = [_data(case, i, s) for i, s in enumerate(case.srcs)]
    views = [GO.permute(x, s.perm) for x, s in zip(stored, case.srcs, strict=True)]
    expected, bound = oracle(case, views)
    path = route(case)
    observe.note("path", path)
    ip = [op.code, case.threads, GGML_TYPE[case.dst_type], len(case.srcs), len(case.iparams)]
    for s in case.srcs:
        ip += [GGML_TYPE[s.type], *s.ne, *s.perm]
    ip += list(case.iparams)
    ip += [reps] if reps != 1 else []
    out_dtype = NP_TYPE[case.dst_type]
    r = target.call("op", ip, list(case.fparams), [*(In(x) for x in stored), Out(expected.size * out_dtype().itemsize)])
    got = r.output(0, out_dtype).reshape(expected.shape)
    shapes = ", ".join(f"{s.type}{list(s.view_ne)}" + ("" if s.perm == IDENTITY else f" perm{list(s.perm)}")
                       for s in case.srcs)
    context = f"ggml_{case.op}({shapes}) -> {case.dst_type}, {case.threads} thread(s), {target.id}, {path}"
    name = f"{case.op}(...)"
    if bound is None and case.op in GO.BINARY and len({s.type for s in case.srcs} | {case.dst_type}) > 1:
        assert_within_ulps(got, expected, ulp_error(got, expected.astype(np.float64), case.dst_type), 1.0,
                           name=name, context=context,
                           derivation="mixed formats: the reference rounds to float32, then to the result's format; "
                                      "a kernel rounding once from the exact value differs by at most 1 ulp")
    elif bound is None:
        assert_bitwise_equal(got, np.asarray(expected, out_dtype), name=name, context=context)
    else:
        assert_all_within(got.astype(np.float64), expected, np.broadcast_to(bound, expected.shape), name=name,
                          context=context, derivation=DERIVATION[case.op])


DERIVATION = {"norm": "the two-pass reference's float32 error (oracles/ggml_ops.py: norm)",
              "rms_norm": "gamma(n + 6) |y| (oracles/ggml_ops.py: rms_norm)",
              "sum_rows": "gamma(n - 1) sum |x| (oracles/ggml_ops.py: sum_rows)"}


# ------------------------------------------------------------------ strategies

#: Permutations of a source's storage a model makes: none, the transpose of dims 0 and 1 (K^T, V^T), the head
#: split (dims 1 and 2), and both.
PERMS = (IDENTITY, (1, 0, 2, 3), (0, 2, 1, 3), (1, 2, 0, 3))
FLOATS = ("f32", "f16")


def _step(sew: int, lmul: int, vlen: int) -> int:
    return vlen * lmul // sew


def row_lengths(op: Op, vlen: int) -> list[int]:
    """The row lengths every run checks at ``vlen``: each loop of ``op`` twice plus a one-element remainder
    and one short of a full trip (``S.crossing_lengths``), and the widths of real models."""
    out = set(REAL_WIDTHS)
    for sew, lmul in op.sew_lmul:
        out.update(S.crossing_lengths(S.VectorShape(sew, (lmul,)), vlen, real=False))
    if op.name == "get_rows":
        out.update(n for loop in MEMCPY_LOOPS if vlen in loop.vlens for n in _witnesses(loop.step(vlen)))
    return sorted(out)


def _witnesses(step: int) -> tuple[int, int]:
    """Two full trips and a one-element remainder, and two full trips and a trip one short."""
    return 2 * step + 1, 3 * step - 1


#: memcpy1d (get_rows' row copy) in f32 elements: VLEN 256 copies 1024 bytes a main trip and 256 (e8m8) a tail
#: trip, VLEN 1024 2048 and 256 (e8m2); other VLENs call the C library.
MEMCPY_LOOPS = (
    L.Loop("get_rows (memcpy1d)", "main loop, 4 x e8m8 (VLEN 256) / 2 x e8m8 (VLEN 1024)", "row (get_rows, f32)",
           step=lambda vlen: {256: 256, 1024: 512}[vlen], real=REAL_WIDTHS, vlens=(256, 1024),
           source="spacemit/rvv_kernels.cpp:memcpy1d"),
    L.Loop("get_rows (memcpy1d)", "tail loop, vsetvl e8m8 (256) / e8m2 (1024)", "row (get_rows, f32)",
           step=lambda vlen: 64, real=REAL_WIDTHS, vlens=(256, 1024), source="spacemit/rvv_kernels.cpp:memcpy1d"),
)
#: A transposed cont / cpy (rvv_transposed_s32/s16_mn_to_nm, inline assembly): the source's rows in groups of 8
#: (vssseg8) and then one at a time, each row's contiguous columns in a vsetvl loop of e32m1 / e16m1.
TRANSPOSE_LOOPS = (
    L.Loop("cont, cpy (transpose)", "rows in groups of 8, then one at a time", "rows (cont / cpy)",
           step=lambda vlen: 8, source="spacemit/rvv_kernels.cpp:rvv_transposed_s32_mn_to_nm"),
    L.Loop("cont, cpy (transpose, f32)", "columns, vsetvl e32m1", "columns (cont / cpy)",
           step=lambda vlen: vlen // 32, source="spacemit/rvv_kernels.cpp:rvv_transposed_s32_mn_to_nm"),
    L.Loop("cont, cpy (transpose, f16)", "columns, vsetvl e16m1", "columns (cont / cpy)",
           step=lambda vlen: vlen // 16, source="spacemit/rvv_kernels.cpp:rvv_transposed_s16_mn_to_nm"),
)
#: Rows and columns of the transposes every run checks (two groups of 8 and a remainder; two e16m1 trips at
#: VLEN 1024 and a remainder).
TRANSPOSE_SIZES = ((17, 129), (23, 3), (1, 200))


_SMALL = st.integers(1, 4)
_LONG = st.integers(1, 1100)  # crosses two e32m4 trips at every VLEN (VLEN 1024: 128 elements a trip)


@st.composite
def _dims(draw: st.DrawFn, n0: st.SearchStrategy[int] = _LONG) -> tuple[int, int, int, int]:
    return (draw(n0, label="ne0"), draw(_SMALL, label="ne1"), draw(st.integers(1, 3), label="ne2"),
            draw(st.integers(1, 2), label="ne3"))


def _storage(view_ne: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The storage shape whose permutation by ``perm`` has ``view_ne``."""
    return tuple(view_ne[perm[i]] for i in range(4))  # type: ignore[return-value]


@st.composite
def _common(draw: st.DrawFn) -> dict:
    return {"seed": draw(st.integers(0, 2**31 - 1), label="seed"),
            "kind": draw(st.sampled_from(("normal", "spiky", "positive")), label="kind"),
            "threads": draw(st.integers(1, 4), label="threads")}


#: The domains a test draws from, per op: ``core`` is what the kernel is written for (one format, contiguous
#: rows, the broadcasts and layouts its dispatch condition names); the others are what ggml's API also lets reach
#: the kernel: ``formats`` (a source of the other float format), ``strides`` (sources seen through a permute),
#: ``broadcast`` (repeat over dims 1-3), ``offset`` (rows whose mean is far from zero beside their spread).  Each
#: (op, domain) is a test of its own, so a known failure of one domain leaves the others gating.
DOMAINS: dict[str, tuple[str, ...]] = {
    "norm": ("core", "strides", "offset"), "rms_norm": ("core", "strides"),
    **{b: ("core", "formats", "strides") for b in GO.BINARY},
    "cont": ("core",), "cpy": ("core", "formats"), "repeat": ("core", "broadcast"), "sum_rows": ("core", "strides"),
    "get_rows": ("core", "formats"), "concat": ("core", "formats"),
}


@st.composite
def op_cases(draw: st.DrawFn, op: Op, domain: str) -> OpCase:
    """A case of ``op`` in ``domain`` (:data:`DOMAINS`): shapes that cross its loops, broadcasts, 1-4 threads."""
    if domain not in DOMAINS[op.name]:
        raise ValueError(f"op_cases: {op.name} has no domain {domain!r}; it has {DOMAINS[op.name]}")
    c = draw(_common())
    name = op.name
    base = draw(st.sampled_from(FLOATS), label="type") if name not in ("norm", "rms_norm", "sum_rows") else "f32"
    other = "f16" if base == "f32" else "f32"
    if name in ("norm", "rms_norm", "sum_rows"):
        if name == "norm" and domain != "offset":  # rows centred on zero: the offset domain moves them
            c["kind"] = "normal"
        ne = draw(_dims())
        perm = (0, 2, 1, 3) if domain == "strides" else IDENTITY  # dim 0 stays contiguous, rows are strided
        offset = draw(st.sampled_from((64.0, 1000.0)), label="offset") if domain == "offset" else 0.0
        eps = (draw(st.sampled_from((1e-5, 1e-6)), label="eps"),) if name != "sum_rows" else ()
        return OpCase(name, (Src("f32", _storage(ne, perm), perm),), "f32", fparams=eps, offset=offset, **c)
    if name in GO.BINARY:
        ne = draw(_dims())
        # src1 divides src0 on every axis: equal, 1, or (axis 0) a divisor
        b0 = draw(st.sampled_from(sorted({ne[0], 1, *(d for d in (2, 3, 4, 8, 16, 64) if ne[0] % d == 0)})),
                  label="ne10")
        nb = (b0, *(draw(st.sampled_from((ne[k], 1)), label=f"ne1{k}") for k in (1, 2, 3)))
        p0 = draw(st.sampled_from((IDENTITY, (0, 2, 1, 3))), label="perm0")
        p1 = draw(st.sampled_from(PERMS[1:]), label="perm1") if domain == "strides" else IDENTITY
        if name == "div":
            c["kind"] = "positive"
        t1 = other if domain == "formats" else base
        return OpCase(name, (Src(base, _storage(ne, p0), p0), Src(t1, _storage(nb, p1), p1)), base, **c)
    if name in ("cont", "cpy"):
        perm = draw(st.sampled_from(PERMS[1:]), label="perm")
        ne = (draw(st.integers(1, 40), label="ne0"), draw(st.integers(1, 140), label="ne1"),
              draw(st.integers(1, 3), label="ne2"), draw(st.integers(1, 2), label="ne3"))
        return OpCase(name, (Src(base, _storage(ne, perm), perm),), other if domain == "formats" else base, **c)
    if name == "repeat":
        to = draw(_dims())
        if domain == "core":  # as many rows as the target: a column broadcast along dim 0, or a plain copy
            src = (draw(st.sampled_from((to[0], 1)), label="ne0"), *to[1:])
        else:
            src = (to[0], *(draw(st.sampled_from((to[k], 1)), label=f"ne{k}") for k in (1, 2, 3)))
        return OpCase(name, (Src(base, src),), base, iparams=to, **c)
    if name == "get_rows":  # ggml_get_rows gives f32 rows of a float source: f16 rows go to the generic kernel
        t = "f16" if domain == "formats" else "f32"
        ne = draw(_dims(st.integers(1, 1300)))
        k = draw(st.integers(1, 5), label="n_ids")
        n_ids = k * ne[2] * ne[3]
        ids = tuple(draw(st.lists(st.integers(0, ne[1] - 1), min_size=n_ids, max_size=n_ids), label="ids"))
        return OpCase(name, (Src(t, ne), Src("i32", (k, ne[2], ne[3], 1))), "f32", ids=ids, **c)
    if name == "concat":
        t = "f16" if domain == "formats" else "f32"
        dim = draw(st.sampled_from((0, 0, 1, 2)), label="dim")
        a = draw(_dims(st.integers(1, 300)))
        b = tuple(draw(st.integers(1, 300), label="ne_b") if k == dim else a[k] for k in range(4))
        return OpCase(name, (Src(t, a), Src(t, b)), t, iparams=(dim,), **c)
    raise ValueError(f"op_cases: unknown op {name!r}")


#: The shrunk reproducers of the pinned tree's findings (harness/data/known_failures.toml, docs/spacemit.md), run
#: first in their (op, domain) on every run, so a known failure fails every time and a fix shows at once.
_F32_1, _F16_1 = Src("f32", (1, 1, 1, 1)), Src("f16", (1, 1, 1, 1))
FINDING_EXAMPLES: dict[tuple[str, str], tuple[OpCase, ...]] = {
    # one-pass variance: E[x^2] - mean^2 in float32 cancels (NaN for a row of one value 64 + v)
    ("norm", "offset"): (OpCase("norm", (_F32_1,), "f32", fparams=(1e-5,), offset=64.0),),
    ("norm", "core"): (OpCase("norm", (Src("f32", (2, 1, 1, 2)),), "f32", fparams=(1e-5,), seed=245),),
    ("norm", "strides"): (OpCase("norm", (Src("f32", (2, 2, 1, 1), (0, 2, 1, 3)),), "f32", fparams=(1e-5,),
                                 seed=245),),
    # the dispatch reads src1 in src0's format
    **{(b, "formats"): (OpCase(b, (_F32_1, _F16_1), "f32", kind="positive"),) for b in GO.BINARY},
    # src1's rows read as contiguous whatever its strides
    **{(b, "strides"): (OpCase(b, (Src("f32", (2, 2, 1, 1)), Src("f32", (2, 2, 1, 1), (1, 0, 2, 3))), "f32",
                               kind="positive"),) for b in GO.BINARY},
    # a transposed copy of a non-square source: rows and columns counted the other way round
    ("cpy", "core"): (OpCase("cpy", (Src("f32", (2, 1, 1, 1), (1, 0, 2, 3)),), "f32"),),
    # repeat over dim 3 of a one-row source: the source is read at the target's dim-2/3 offsets
    ("repeat", "broadcast"): (OpCase("repeat", (_F32_1,), "f32", iparams=(1, 1, 1, 2)),),
    # f16 concat along dim 0: GGML_ASSERT(type size == 4) aborts
    ("concat", "formats"): (OpCase("concat", (_F16_1, _F16_1), "f16", iparams=(0,)),),
}


def finding_examples(op: Op, domain: str) -> tuple[OpCase, ...]:
    """The findings' reproducers of ``op`` in ``domain`` (:data:`FINDING_EXAMPLES`)."""
    return FINDING_EXAMPLES.get((op.name, domain), ())


def fixed_cases(op: Op, domain: str, vlen: int) -> list[OpCase]:
    """The cases every run checks at ``vlen`` (after the draws) in the ``core`` domain: each row length of
    :func:`row_lengths`, one case per format, on the kernel's path (identity layouts)."""
    out: list[OpCase] = []
    if domain != "core":
        return out
    for i, n in enumerate(row_lengths(op, vlen)):
        base = {"seed": 1000 + i, "threads": 1 + i % 3}
        for t in (FLOATS if op.name in (*GO.BINARY, "cont", "cpy", "repeat") else ("f32",)):
            ne = (n, 3, 2, 1)
            name = op.name
            if name in ("norm", "rms_norm"):
                out.append(OpCase(name, (Src(t, ne),), t, fparams=(1e-6,), **base))
            elif name in GO.BINARY:
                out.append(OpCase(name, (Src(t, ne), Src(t, (n, 1, 2, 1))), t,
                                  kind="positive" if name == "div" else "normal", **base))
            elif name in ("cont", "cpy") and i < len(TRANSPOSE_SIZES):
                rows, cols = TRANSPOSE_SIZES[i]  # the view is [rows, cols]: storage [cols, rows] transposed
                out.append(OpCase(name, (Src(t, (cols, rows, 2, 1), (1, 0, 2, 3)),), t, **base))
            elif name == "repeat":
                out.append(OpCase(name, (Src(t, (n, 1, 1, 1)),), t, iparams=(n, 3, 1, 1), **base))
            elif name == "sum_rows":
                out.append(OpCase(name, (Src(t, ne),), t, **base))
            elif name == "get_rows":
                out.append(OpCase(name, (Src(t, ne), Src("i32", (2, 2, 1, 1))), "f32", ids=(2, 0, 1, 1), **base))
            elif name == "concat":
                out.append(OpCase(name, (Src(t, (n, 2, 1, 1)), Src(t, (5, 2, 1, 1))), t, iparams=(0,), **base))
    return out


# ------------------------------------------------------------------ loop sizes (docs/spacemit.md)

def _var(op: Op) -> str:
    return f"row ({op.name})"


@cache
def _drawn(vlen: int) -> dict[str, L.Drawn]:
    rows = {_var(o): L.Drawn(every_run=sorted({c.srcs[0].view_ne[0] for c in fixed_cases(o, "core", vlen)}), lo=1,
                             hi=1100) for o in OPS.values() if o.sew_lmul}
    views = [c.srcs[0].view_ne for c in fixed_cases(OPS["cont"], "core", vlen)]
    return {**rows,
            "row (get_rows, f32)": L.Drawn(every_run=row_lengths(OPS["get_rows"], vlen), lo=1, hi=1300),
            "rows (cont / cpy)": L.Drawn(every_run=sorted({v[0] for v in views}), lo=1, hi=40),
            "columns (cont / cpy)": L.Drawn(every_run=sorted({v[1] for v in views}), lo=1, hi=140)}


def _loops() -> list[L.Loop]:
    out = [loop for o in OPS.values() for sew, lmul in o.sew_lmul
           for loop in S.VectorShape(sew, (lmul,)).loops(o.name, _var(o), f"spacemit/rvv_kernels.cpp:{o.kernel}",
                                                         real=REAL_WIDTHS)]
    return [*out, *MEMCPY_LOOPS, *TRANSPOSE_LOOPS]


L.register(L.Family(
    name="spacemit_ops", doc="docs/spacemit.md", loops=_loops(), drawn=_drawn,
    notes=("The fixed cases run in each op's core domain; the other domains draw the same sizes. concat along dim 0 "
           "copies element by element (no vector loop); repeat's dim-1 kernel walks its rows as the nrows one does.",)))


# ------------------------------------------------------------------ what the tree has (cases/coverage.py)

#: Functions of spacemit/rvv_kernels.cpp with an RVV path that this family does not test, and who does.
ELSEWHERE = {
    "quantize_a_row_i8": "cases/spacemit_quant.py", "quantize_a_4row_i8": "cases/spacemit_quant.py",
    "quantize_a_row_i8_hp": "cases/spacemit_quant.py", "quantize_a_4row_i8_hp": "cases/spacemit_quant.py",
    "quantize_a_row_i8k": "cases/spacemit_quant.py", "quantize_a_4row_i8k": "cases/spacemit_quant.py",
}
#: Helpers reached through the ops above or the flash-attention kernels (tested through them).
HELPERS_OF = {"memcpy1d": "get_rows",
              "forward_binary_mixed": "add"}  # forward_binary's path for a src1 of the other format (a fixed tree)



@coverage.register("spacemit_ops")
def scan(inv: Tree) -> coverage.FamilyScan:
    """spacemit/rvv_kernels.cpp: a function with an RVV path that is neither an op's kernel, a helper of one,
    the flash-attention kernels' (names with flash_attn, rvv_ and reduce_), nor another family's (ELSEWHERE) is
    uncovered; a tree without the backend is not in this tree."""
    src = inv.source
    out = coverage.FamilyScan("spacemit_ops")
    if not (src.ggml / FILES[0]).is_file():
        out.not_in_tree.append(absent(src, FILES[0]))
        return out
    found = rvv_paths(src, FILES)
    known = {o.kernel for o in OPS.values()} | {k for o in OPS.values() for k in o.also} | set(ELSEWHERE) | set(HELPERS_OF)
    for name, r in sorted(found.items()):
        if name in known or "flash_attn" in name or name.startswith(("rvv_", "reduce_sum")):
            continue
        out.uncovered.append(coverage.Uncovered(name, where(src, r.function),
                                                f"{r.describe()}; no test knows it (cases/spacemit_ops.py)"))
    out.notes += file_notes(src, FILES)
    return out
