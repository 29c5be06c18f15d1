"""Rounding-error constants for the bounds the tests derive (Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., ch. 2-3)."""

from __future__ import annotations

#: Unit roundoff of binary32 and binary16 (round to nearest).
U_F32 = 2.0 ** -24
U_F16 = 2.0 ** -11


def gamma(n: int, u: float = U_F32) -> float:
    """gamma(n) = n u / (1 - n u): bounds the relative effect of n successive roundings.

    Summing n terms in any order (hence any reduction tree a vector kernel
    uses) commits an error of at most gamma(n - 1) * sum |terms|.
    """
    nu = n * u
    return float("inf") if nu >= 1 else nu / (1 - nu)
