"""Oracle for ggml's float matrix multiplication (``ggml_mul_mat``), in float64.

ggml's convention: ``mul_mat(A, B)`` with A of shape ``[batch][m][k]`` and B of shape
``[batch * bcast][n][k]`` gives C of shape ``[batch * bcast][n][m]`` with
``C[b][j][i] = sum_l A[b // bcast][i][l] * B[b][j][l]`` -- every element a dot
product of two rows of length k.  Nothing here imports the harness.
"""

from __future__ import annotations

import numpy as np

#: Unit roundoff of float64, for the oracle's own (tiny) summation error.
U_F64 = 2.0 ** -53


def matmul(a: np.ndarray, b: np.ndarray, bcast: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """C = A x B^T per batch (B batch ``i`` uses A batch ``i // bcast``), and sum |a_l b_l| per element.

    Products of two values with at most 24 significant bits are exact in
    float64; the float64 sums (in any order: BLAS) commit at most
    ``k * 2^-53 * sum|a_l b_l|`` (:func:`oracle_error`), which a caller adds to its bound.
    """
    a64 = np.repeat(np.asarray(a, np.float64), bcast, axis=0)
    b64 = np.asarray(b, np.float64)
    if a64.shape[0] != b64.shape[0] or a64.shape[2] != b64.shape[2]:
        raise ValueError(f"matmul: A {a.shape} x{bcast} and B {b.shape} do not match")
    c = b64 @ a64.transpose(0, 2, 1)
    abs_sum = np.abs(b64) @ np.abs(a64).transpose(0, 2, 1)
    return c, abs_sum


def oracle_error(k: int, abs_sum: np.ndarray) -> np.ndarray:
    """Bound on the float64 rounding of :func:`matmul`'s sums of k exact products."""
    return 1.01 * k * U_F64 * abs_sum
