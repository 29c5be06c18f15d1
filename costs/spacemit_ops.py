"""Cost cases of SpacemiT's RVV ops (cases/spacemit_ops.py): what SpacemiT's kernels cost against ggml-cpu's own ops
for the same graph.  Each case is one op through the kernel server's ``op`` request (the differential family's
``check_op``: the same sources, the result held against its oracle), measured in two builds:

* ``spacemit``: SpacemiT's extra buffer type takes the op to its kernel in ``spacemit/rvv_kernels.cpp``
  (``forward_norm_f32``, ``forward_binary<op, T>``, ``forward_cont_with_permute`` ...);
* ``zvfh`` (or any ggml-cpu build): ggml-cpu's own op (``ggml_compute_forward_<op>``), the code the SpacemiT kernel
  replaces.

The two rows of one case at one VLEN are the same graph on the same bytes: their ratio is what the SpacemiT
kernel saves (below 1) or costs, per VLEN (256: the K1's X60; 1024: the A100).  Shapes: ``ROWS`` token rows of a
real model's width (SmolLM2's 576, Llama's 2048 and 4096), one thread; f32 and f16 for the binary ops, as
SmolLM2's graph runs them.  Each at ``reps`` 1 and 2 (the ``op`` request computes its graph ``reps`` times after
one set-up): their difference is one compute of the op, the request's set-up (the context, the graph, the
buffers: some 40 000 instructions, more than a norm of 576 x 8 itself) cancelled, as costs/spacemit_gemm.py and
costs/model.py do.  :func:`table` sets one compute at the two builds side by side from a run's rows, with what
of it is the C library's memcpy / memset (musl's C loops under Spike: a board's libc copies faster).  Units:
elements of the source rows (width x ROWS; get_rows: the elements it copies).  Each row records the path its call executed
(``path``: the SpacemiT kernel or ggml-cpu's functions, read from the functions Spike saw run) and, where that
is not what the build's dispatch should give (cases/spacemit_ops.py ``route`` in the spacemit build, ggml-cpu's
own op elsewhere), ``path_expected``.  ``requires`` names the SpacemiT kernel and the ggml op, so
``--changed-only`` (the gate's cost step, ``rvvdiff fixes cost``) selects a case when either side's code
changes: the kernel, a helper it calls (``rvv_transposed_s32_mn_to_nm``, ``memcpy1d``), or ggml-cpu's op.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cases import spacemit_ops as SO
from costs.suite import CostCase

#: Real models' row widths (SmolLM2-135M; Llama 3.2 1B / TinyLlama; Llama 2 7B / Mistral 7B) and the rows of a
#: prompt chunk.
WIDTHS = (576, 2048, 4096)
ROWS = 8
#: get_rows: rows of the embedding table the ids pick from (fixed ids, spread over the table).
TABLE_ROWS = 32
IDS = tuple((11 * i + 5) % TABLE_ROWS for i in range(ROWS))
REPS = (1, 2)
SEED = 67
EPS = (1e-6,)
_T = (1, 0, 2, 3)

#: A source, by name: its storage (ne) at width w, and the permutation it is seen through.
LAYOUTS: dict[str, Callable[[int], tuple[tuple[int, int, int, int], tuple[int, int, int, int]]]] = {
    "rows": lambda w: ((w, ROWS, 1, 1), SO.IDENTITY),  # ROWS tokens' rows
    "row": lambda w: ((w, 1, 1, 1), SO.IDENTITY),  # one row, broadcast over the tokens (a norm's weight)
    "rows^T": lambda w: ((w, ROWS, 1, 1), _T),  # the same seen transposed: a ROWS x w view
    "table": lambda w: ((w, TABLE_ROWS, 1, 1), SO.IDENTITY),  # an embedding table
    "ids": lambda w: ((ROWS, 1, 1, 1), SO.IDENTITY),  # get_rows' row ids (i32)
}


@dataclass(frozen=True)
class Call:
    """One measured op: its name (cases/spacemit_ops.py ``OPS``), the sources' format, their layouts, what it
    stands for in a model."""

    op: str
    type: str
    sources: tuple[str, ...]
    what: str

    def case(self, w: int) -> SO.OpCase:
        srcs = tuple(SO.Src("i32" if s == "ids" else self.type, *LAYOUTS[s](w)) for s in self.sources)
        return SO.OpCase(self.op, srcs, self.type, fparams=EPS if self.op.endswith("norm") else (), seed=SEED,
                         ids=IDS if self.op == "get_rows" else ())


CALLS = (
    Call("norm", "f32", ("rows",), "LayerNorm (GPT-2, Phi-2, Whisper)"),
    Call("rms_norm", "f32", ("rows",), "RMSNorm (Llama, Qwen, SmolLM2)"),
    Call("add", "f32", ("rows", "rows"), "the residual add"),
    Call("add", "f16", ("rows", "rows"), "the residual add, f16"),
    Call("mul", "f32", ("rows", "row"), "x times the norm's weight row"),
    Call("mul", "f16", ("rows", "row"), "x times the norm's weight row, f16"),
    Call("sum_rows", "f32", ("rows",), "row sums"),
    Call("cont", "f32", ("rows^T",), "a transposed view made contiguous"),
    Call("get_rows", "f32", ("table", "ids"), "token embeddings"),
)

#: The functions a path is told by: SpacemiT's (rvv_kernels.cpp) and ggml-cpu's ops.
_NAME = re.compile(r"(\d*)((?:ggml_compute_forward_|forward_|rvv_transposed_|memcpy1d)\w*)")


def _idents(functions: Mapping[str, int]) -> list[str]:
    """The op functions among the symbols executed, by name (a mangled name's length prefix bounds it)."""
    out = set()
    for sym in functions:
        if m := _NAME.search(sym):
            out.add(m[2][:int(m[1])] if m[1] else m[2])
    return sorted(out)


def path_of(case: SO.OpCase) -> Callable[[Any, Mapping[str, int]], dict[str, str]]:
    """A row's path fields (costs/suite.py ``CostCase.path``): the SpacemiT kernel the call executed, else
    ggml-cpu's op functions; ``path_expected`` where the build's dispatch says otherwise."""
    def fields(target, functions: Mapping[str, int]) -> dict[str, str]:
        names = _idents(functions)
        mine = [n for n in names if not n.startswith("ggml_")]
        ran = f"SpacemiT: {', '.join(mine)}" if mine else f"ggml-cpu: {', '.join(names) or 'no op function'}"
        want = SO.route(case) if target.isa.backend == "spacemit" else "generic"
        kernel = want.split("<")[0]
        ok = kernel in mine if want != "generic" else not mine
        return {"path": ran, **({} if ok else {"path_expected": want if want != "generic" else "ggml-cpu's own op"})}

    return fields


def _case(call: Call, w: int, reps: int) -> CostCase:
    case = call.case(w)
    names = (SO.OPS[call.op].kernel, f"ggml_{call.op}")

    def run(target: Any) -> None:
        SO.check_op(case, target, reps)

    return CostCase("spacemit_ops", f"{call.op}-{call.type}", f"{w}x{ROWS}-r{reps}", "rvv", "op", f"ggml_{call.op}",
                    ROWS * w, "element", run, entry_points=names, requires=names, has_twin=False, path=path_of(case),
                    backend=("spacemit", "cpu"))


CASES = [_case(call, w, reps) for call in CALLS for w in WIDTHS for reps in REPS]


# ------------------------------------------------------------------ the table (docs/spacemit.md)

#: The families whose rows :func:`table` reads (costs/spacemit_fa.py's are sized and run the same way).
FAMILIES = ("spacemit_ops", "spacemit_fa")
#: The C library's functions a call may spend in (the clang builds': zig's compiler_rt and std.math, not a board's
#: libc): these by name, and the ``compiler_rt.`` / ``math.`` functions they call.
LIBC = ("memcpy", "memmove", "memset", "expf", "tanhf")


def _in_libc(name: str) -> bool:
    return name in LIBC or name.startswith(("compiler_rt.", "math."))


def per_call(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int, str], tuple[int, int, str]]:
    """One compute of each case's op from a run's rows: (name, width x rows, VLEN, ISA build) -> (instructions of
    reps 2 minus those of reps 1, of them in the C library (:data:`LIBC`; of the twelve largest functions a row
    records), the path reps 2 executed)."""
    by = {(r["name"], r["size"], int(r["vlen"]), r["isa"]): r for r in rows if r.get("family") in FAMILIES}
    libc = lambda r: sum(n for f, n in r.get("functions", {}).items() if _in_libc(f))  # noqa: E731
    return {(name, size[:-3], vlen, isa): (r2["instret"] - r1["instret"], libc(r2) - libc(r1), r2.get("path", ""))
            for (name, size, vlen, isa), r2 in by.items()
            if size.endswith("-r2") and (r1 := by.get((name, size[:-1] + "1", vlen, isa)))}


def table(rows: list[dict[str, Any]], cpu: str = "zvfh") -> str:
    """Markdown, a line per case and size: at each VLEN one compute on SpacemiT's kernel (the spacemit build) and
    on ggml-cpu's own op (the ``cpu`` build), each with its C library part, their ratio with and without it;
    then the paths executed."""
    calls = per_call(rows)
    order = {f"{c.op}-{c.type}": i for i, c in enumerate(CALLS)}
    vlens = sorted({v for _, _, v, _ in calls})
    width = lambda size: int(size.split("x")[0]) if size[0].isdigit() else 0  # noqa: E731
    lines = sorted({(n, s) for n, s, _, _ in calls}, key=lambda k: (order.get(k[0], len(order)), k[0], width(k[1])))
    figure = lambda x: f"{x[0]:,} ({x[1]:,})".replace(",", " ") if x else "-"  # noqa: E731
    div = lambda x, y: f"{x / y:.2g}" if y else "-"  # noqa: E731
    ratio = lambda a, b: f"{div(a[0], b[0])} ({div(a[0] - a[1], b[0] - b[1])})" if a and b else "-"  # noqa: E731
    out = ["| case | size | " + " | ".join(f"SpacemiT, VLEN {v} | ggml-cpu, VLEN {v} | ratio, VLEN {v}" for v in vlens)
           + " | paths (SpacemiT; ggml-cpu) |", "|---|---|" + "---|---|---|" * len(vlens) + "---|"]
    for name, size in lines:
        cells, paths = [], {isa: [] for isa in ("spacemit", cpu)}
        for v in vlens:
            a, b = calls.get((name, size, v, "spacemit")), calls.get((name, size, v, cpu))
            cells += [figure(a), figure(b), ratio(a, b)]
            for isa, x in (("spacemit", a), (cpu, b)):
                if x and x[2] not in paths[isa]:
                    paths[isa].append(x[2])
        out.append(f"| {name} | {size.replace('x', ' x ')} | {' | '.join(cells)} | "
                   f"{' / '.join(paths['spacemit'])}; {' / '.join(paths[cpu])} |")
    return "\n".join(out)


if __name__ == "__main__":  # python -m costs.spacemit_ops reports/cost/cost.json ... (or --cost-log files)
    import json
    import sys

    rows: list[dict[str, Any]] = []
    for path in sys.argv[1:]:
        text = open(path).read()
        rows += json.loads(text)["head"] if path.endswith(".json") else [json.loads(x) for x in text.splitlines() if x]
    print(table(rows))
