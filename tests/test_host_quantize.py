"""The host build of the tree's quantizers (harness/toolchain/host.py), which makes the weight corpus of the
quantized dot tests: the same bytes as the emulated build's ggml_quantize_chunk, and a clear reason
(with a fallback under the emulator) where the host cannot build it."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import server

from cases.quant_dot import WEIGHT_DATA, _weight_floats
from harness.emulators.protocol import In, Out
from harness.ggml import source, tree
from harness.toolchain import host
from oracles import quants as Q


@pytest.fixture(scope="module")
def pinned() -> source.GgmlSource:
    return source.resolve(None)


def _both(pinned: source.GgmlSource, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``name`` made by the host program and by the emulated build (VLEN 128, zvfh), and the floats."""
    n = 3 * Q.fmt(name).block
    rows = np.stack([_weight_floats(k, n, seed=3) for k in WEIGHT_DATA])
    ones = np.ones(n, np.float32)
    rb = Q.row_bytes(name, n)
    t = tree.of(pinned).type_id(name)
    (got,) = host.quantize(host.quantizer(pinned), t, [rows], [ones], [rb])
    r = server().call("quantize_chunk", [t, len(WEIGHT_DATA), n], [],
                      [In(rows), In(ones), Out(len(WEIGHT_DATA) * rb)], timeout=600)
    return got, r.output(0, np.uint8).reshape(len(WEIGHT_DATA), rb), rows


@pytest.mark.parametrize("name", ["q4_0", "q8_0", "iq4_nl", "iq2_xxs"])
def test_the_host_makes_the_rows_the_emulated_build_makes(pinned: source.GgmlSource, name: str) -> None:
    got, emulated, _ = _both(pinned, name)
    assert got.tobytes() == emulated.tobytes()


def test_where_the_bytes_differ_the_host_rows_are_as_good(pinned: source.GgmlSource) -> None:
    """q4_K's scale search rounds differently in the last bits on the host (no FMA contraction in x86-64's
    baseline; the RISC-V build contracts): other bytes, the same quality of approximation."""
    got, emulated, rows = _both(pinned, "q4_K")
    assert got.tobytes() != emulated.tobytes()  # if this starts to hold, fold q4_K into the test above
    for g, e, x in zip(got, emulated, rows):
        err_host = np.sqrt(np.mean((Q.dequantize("q4_K", g) - x) ** 2))
        err_emulated = np.sqrt(np.mean((Q.dequantize("q4_K", e) - x) ** 2))
        assert err_host <= 1.05 * err_emulated + 1e-6, (err_host, err_emulated)


def test_one_process_serves_several_requests_in_order(pinned: source.GgmlSource) -> None:
    t = tree.of(pinned).type_id("q8_0")
    a = np.full((1, 32), 1.0, np.float32)
    b = np.full((2, 64), -2.0, np.float32)
    out = host.quantize(host.quantizer(pinned), t, [a, b], [np.ones(32, np.float32), np.ones(64, np.float32)],
                        [34, 68])
    assert [o.shape for o in out] == [(1, 34), (2, 68)]
    assert np.allclose(Q.dequantize("q8_0", out[0].reshape(-1)), 1.0, atol=0.01)
    assert np.allclose(Q.dequantize("q8_0", out[1].reshape(-1)), -2.0, atol=0.02)


def test_a_bad_request_is_an_error_with_the_program_s_message(pinned: source.GgmlSource) -> None:
    with pytest.raises(host.HostBuildUnavailable, match="bad request: type 9999"):
        host.quantize(host.quantizer(pinned), 9999, [np.ones((1, 32), np.float32)], [np.ones(32, np.float32)], [34])


def test_a_host_without_a_compiler_is_one_clear_line(pinned: source.GgmlSource,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(host.HostBuildUnavailable, match="install build-essential and cmake"):
        host.quantizer(pinned)
