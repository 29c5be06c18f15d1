"""FP16 / BF16 <-> FP32 conversions (``ggml_cpu_*`` in ggml-cpu.c): bit-exact against NumPy / ml_dtypes.

Tolerance: none.  A conversion has one right answer per input (IEEE
round-to-nearest-even for narrowing, exact widening), so every element must
match bit for bit.  The one freedom: a NaN input must give a NaN, with any
payload (the RISC-V vector conversions return the canonical NaN, the C
reference keeps the payload; ggml specifies neither).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cases import strategies as S
from harness import observe
from harness.compare import assert_bitwise_equal
from harness.protocol import In, Out
from oracles import floats as F

_STORAGE = {"f32": np.float32, "f16": np.uint16, "bf16": np.uint16}
_VIEW = {"f32": np.float32, "f16": np.float16, "bf16": F.BF16}


@dataclass(frozen=True, repr=False)
class Conversion(S.KernelSpec):
    """One ggml conversion entry point and what the harness knows about it."""

    name: str  # ggml_cpu_<name>, and the kernel server's name for it
    src: str
    dst: str
    shape: S.VectorShape  # how its RVV path walks the input (element width, LMUL, unroll)
    rvv_when: str | None  # the extension that selects the RVV path; None: scalar in every build
    oracle: Callable[[np.ndarray], np.ndarray]

    def path(self, features: dict[str, bool]) -> str:
        return "rvv" if self.rvv_when and features.get(self.rvv_when) else "scalar"


CONVERSIONS = [
    # vfwcvt.f.f.v at e16/m2, unrolled by two, then a vsetvl tail loop.
    Conversion("fp16_to_fp32", "f16", "f32", S.VectorShape(16, (2,), 2), "zvfhmin", F.fp16_bits_to_f32),
    # vfncvt.f.f.w from e32/m2 in one vsetvl loop.
    Conversion("fp32_to_fp16", "f32", "f16", S.VectorShape(32, (2,)), "zvfh", F.f32_to_fp16_bits),
    # vfwcvtbf16 at e16/m2, unrolled by two, then a tail loop.
    Conversion("bf16_to_fp32", "bf16", "f32", S.VectorShape(16, (2,), 2), "zvfbfmin", F.bf16_bits_to_f32),
    # Scalar loop in every build of the pinned tree (tested so that a new RVV path is covered).
    Conversion("fp32_to_bf16", "f32", "bf16", S.VectorShape(32, (1,)), None, F.f32_to_bf16_bits),
]


def _inputs(kernel: Conversion, n: int) -> st.SearchStrategy[np.ndarray]:
    if kernel.src == "f32":
        return S.fp32_for_narrowing(n, kernel.dst)
    return S.uint16_patterns(n)


def check_conversion(kernel: Conversion, target, x: np.ndarray) -> None:
    """Run ``kernel`` on ``x`` at ``target`` and compare with the oracle, bit for bit."""
    n = x.size
    path = kernel.path(target.features)
    observe.note("path", path)
    out_itemsize = np.dtype(_STORAGE[kernel.dst]).itemsize
    r = target.call(kernel.name, [n], [], [In(x), Out(n * out_itemsize)])
    got = r.output(0, _STORAGE[kernel.dst]).view(_VIEW[kernel.dst])
    expected = np.asarray(kernel.oracle(x)).view(_VIEW[kernel.dst])
    shown = x.view(_VIEW[kernel.src])
    assert_bitwise_equal(got, expected, name=f"{kernel.name}(x)", inputs=shown,
                         context=f"ggml_cpu_{kernel.name}, n={n}, {target.id}, {path} path")


ids = [k.name for k in CONVERSIONS]


@pytest.mark.parametrize("kernel", CONVERSIONS, ids=ids)
@given(data=st.data())
def test_convert(kernel: Conversion, target, data: st.DataObject) -> None:
    """Random lengths around every VLMAX boundary, inputs from every class of value."""
    n = data.draw(S.lengths(kernel.shape), label="n")
    x = data.draw(_inputs(kernel, n), label="x")
    check_conversion(kernel, target, x)


@pytest.mark.parametrize("kernel", CONVERSIONS, ids=ids)
def test_convert_sweep(kernel: Conversion, target) -> None:
    """One call over every input that matters: all 65536 patterns of a 16-bit source, or every
    rounding edge (tie, tie +- 1 ulp, overflow, subnormal, NaN payloads) of a narrowing."""
    if kernel.src == "f32":
        x = S.all_edges_fp32(kernel.dst)
    else:
        x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    check_conversion(kernel, target, x)
