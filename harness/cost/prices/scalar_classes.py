"""The class of a scalar RISC-V instruction, for pricing: what a core's scalar pipelines do differently.

A kernel's instruction mix (harness/cost/measure/spike_count.py) names every vector instruction by its name and vtype;
scalar instructions are counted by class, the granularity at which a core's scalar timings are published and
modelled (harness/cost/prices/scalar_prices.py): integer arithmetic, loads, stores, conditional branches, jumps,
multiplies, divides, floating-point arithmetic and its divides and square roots, and the rest (CSR accesses,
fences, atomics, environment calls).  Both encodings are read: the 32-bit base instructions and the 16-bit
compressed ones (C, and the Zcb loads, stores and multiply), which a compiler uses for a large share of scalar
code.  Floating-point loads and stores count as loads and stores (they use the same pipe).  A word this module
does not recognise is integer arithmetic, the class the mix used for every scalar instruction before the split.
"""

from __future__ import annotations

#: The mix keys of the scalar classes, in the order the cost pages list them.
ALU = "scalar"
LOAD = "scalar load"
STORE = "scalar store"
BRANCH = "scalar branch"
JUMP = "scalar jump"
MUL = "scalar mul"
DIV = "scalar div"
FP = "scalar fp"
FP_DIV = "scalar fp div"
OTHER = "scalar other"
CLASSES = (ALU, LOAD, STORE, BRANCH, JUMP, MUL, DIV, FP, FP_DIV, OTHER)

_MAJOR = {0x03: LOAD, 0x07: LOAD, 0x23: STORE, 0x27: STORE, 0x63: BRANCH, 0x6F: JUMP, 0x67: JUMP,
          0x43: FP, 0x47: FP, 0x4B: FP, 0x4F: FP, 0x73: OTHER, 0x0F: OTHER, 0x2F: OTHER}
#: OP-FP's funct5 of the divide (0b00011) and the square root (0b01011).
_FP_DIV_FUNCT5 = (0x03, 0x0B)


def of_word(w: int) -> str:
    """The class of the 32-bit scalar instruction ``w`` (a vector one is never passed here)."""
    op = w & 0x7F
    if op in (0x33, 0x3B) and (w >> 25) == 1:  # the M extension
        return DIV if (w >> 12) & 4 else MUL
    if op == 0x53:
        return FP_DIV if (w >> 27) in _FP_DIV_FUNCT5 else FP
    return _MAJOR.get(op, ALU)


def of_half(h: int) -> str:
    """The class of the 16-bit compressed instruction ``h``."""
    quadrant, funct3 = h & 3, (h >> 13) & 7
    if quadrant == 0:
        if funct3 == 4:  # Zcb: c.lbu, c.lhu / c.lh, c.sb, c.sh by bits 15:10
            return STORE if (h >> 10) & 0x3F in (0b100010, 0b100011) else LOAD
        return ALU if funct3 == 0 else LOAD if funct3 < 4 else STORE
    if quadrant == 1:
        if funct3 == 5:
            return JUMP  # c.j
        if funct3 in (6, 7):
            return BRANCH  # c.beqz, c.bnez
        if funct3 == 4 and (h >> 10) & 0x3F == 0b100111 and (h >> 5) & 3 == 2:
            return MUL  # Zcb c.mul
        return ALU
    # quadrant 2
    if funct3 in (1, 2, 3):
        return LOAD  # c.fldsp, c.lwsp, c.ldsp
    if funct3 in (5, 6, 7):
        return STORE  # c.fsdsp, c.swsp, c.sdsp
    if funct3 == 4 and (h >> 2) & 0x1F == 0:  # rs2 = x0: c.jr / c.jalr, or c.ebreak
        return OTHER if (h >> 7) & 0x1F == 0 else JUMP
    return ALU  # c.slli, c.mv, c.add
