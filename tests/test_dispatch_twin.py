"""A dispatch variant held to its static twin (docs/dispatch.md): the twin of each ISA build, which compilers' two
builds can be held to the same bytes, the comparison's message on canned buffers, and a difference that no known
failure excuses."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from launch import pytest_in

from harness.check import observe
from harness.check.compare import OutputsDiffer, assert_same_outputs
from harness.core.config import DISPATCH_V, ISA_BUILDS, NOVECTOR, SPACEMIT, static_twin
from harness.core.matrix import Matrix, parse_compilers
from harness.plugin.session import differs, twin_lines
from harness.toolchain.compilers import COMPILERS, twin_gap

BUILDS = ("riscv64_v by gcc14", "its static twin v by gcc14")


def test_the_variant_s_twin_is_the_static_build_of_the_same_extensions() -> None:
    assert static_twin(DISPATCH_V) == static_twin("riscv64_v") == "v"
    assert set(ISA_BUILDS["v"].march) == set(DISPATCH_V.march) and ISA_BUILDS["v"].qemu == DISPATCH_V.qemu
    for isa in (*ISA_BUILDS.values(), SPACEMIT, NOVECTOR):
        assert static_twin(isa) is None and static_twin(isa.name) is None
    assert static_twin("no-such-build") is None


def test_only_a_compiler_whose_two_builds_link_one_libc_is_compared() -> None:
    assert twin_gap("gcc14") == ""
    assert COMPILERS["clang"].libc == "musl" and COMPILERS["clang"].shared_libc == "glibc"
    assert "links musl and its shared libraries glibc" in twin_gap("clang").replace("static builds link", "links")
    assert "not known" in twin_gap("user")
    lines = twin_lines(Matrix(isas=("v", "riscv64_v"), compilers=parse_compilers("gcc14,clang")))
    assert lines == [
        "ISA build riscv64_v by gcc14: every kernel call also made on its static twin v by gcc14, the output bytes "
        "compared",
        f"ISA build riscv64_v by clang: not held to its static twin v: {twin_gap('clang')}"]


def test_identical_outputs_are_counted() -> None:
    seen = observe.Observation()
    observe.attach(seen)
    try:
        for _ in range(3):
            assert_same_outputs([b"\x01\x02", b""], [b"\x01\x02", b""], kernel="k", builds=BUILDS, context="ctx")
    finally:
        observe.detach(seen)
    assert seen.take() == {"identical": 3}


def test_a_difference_names_kernel_buffer_byte_values_and_builds() -> None:
    a = np.array([1.0, 2.0, 3.0], np.float32)
    b = a.copy()
    b[1] = np.nextafter(np.float32(2.0), np.float32(3.0))
    with pytest.raises(OutputsDiffer) as e:
        assert_same_outputs([b"\x00", a.tobytes()], [b"\x00", b.tobytes()], kernel="vec_dot_f32", builds=BUILDS,
                            context="vlen256-riscv64_v")
    assert str(e.value) == (
        "vec_dot_f32: output buffer 1 differs between riscv64_v by gcc14 and its static twin v by gcc14 "
        "[vlen256-riscv64_v]\n"
        "  1 of 12 bytes differ; the first at byte 4: 0x00 on riscv64_v by gcc14, 0x01 on its static twin v by gcc14\n"
        "  word 1 (bytes 4-7) as float32: 2.0 (0x40000000) on riscv64_v by gcc14, 2.000000238418579 (0x40000001) on its "
        "static twin v by gcc14")
    assert (e.value.kernel, e.value.buffer, e.value.index, e.value.builds) == ("vec_dot_f32", 1, 4, BUILDS)
    assert isinstance(e.value, AssertionError)


def test_buffers_of_other_sizes_or_counts_differ() -> None:
    with pytest.raises(OutputsDiffer, match="output buffer 0 is 3 bytes on riscv64_v by gcc14, 2 on its static twin"):
        assert_same_outputs([b"abc"], [b"ab"], kernel="k", builds=BUILDS, context="ctx")
    with pytest.raises(OutputsDiffer, match="k: 2 output buffers on riscv64_v by gcc14, 1 on its static twin"):
        assert_same_outputs([b"a", b"b"], [b"a"], kernel="k", builds=BUILDS, context="ctx")
    with pytest.raises(OutputsDiffer) as e:  # not made of 4-byte words: no float32 line
        assert_same_outputs([b"\x00\x01\x02"], [b"\x00\x01\x03"], kernel="k", builds=BUILDS, context="ctx")
    assert "float32" not in str(e.value) and "the first at byte 2: 0x02" in str(e.value)


def test_a_difference_is_found_inside_hypothesis_s_group_of_failures() -> None:
    d = OutputsDiffer("x", kernel="k", buffer=0, index=0, builds=BUILDS)
    assert differs(d) and not differs(AssertionError("oracle"))
    assert differs(BaseExceptionGroup("two", [AssertionError("oracle"), ExceptionGroup("inner", [d])]))
    assert not differs(ExceptionGroup("one", [AssertionError("oracle")]))


#: Two expected failures (as a known failure marks them): one fails its oracle, one finds two builds differing.
KNOWN = f"""
import pytest
from harness.check.compare import assert_same_outputs

@pytest.mark.xfail(strict=True, reason="known failure: the oracle's")
def test_oracle(target):
    assert False, "beyond the bound"

@pytest.mark.xfail(strict=True, reason="known failure: the oracle's")
def test_builds(target):
    assert_same_outputs([{struct.pack('<f', 1.0)!r}], [{struct.pack('<f', 1.5)!r}], kernel="k",
                        builds=("riscv64_v by gcc14", "its static twin v by gcc14"), context=target.id)
"""


def test_a_known_failure_does_not_excuse_two_builds_differing(pytester: pytest.Pytester) -> None:
    """The known-failure machinery (strict xfail marks) keeps the oracle's failure expected and reports the
    difference between two builds as a failure (harness/plugin/session.py's makereport)."""
    pytester.makepyfile(test_known=KNOWN)
    r = pytest_in(pytester, "--vlen", "128", "--isa", "zvfh", "-rfx", code=1)
    r.assert_outcomes(failed=1, xfailed=1)
    assert "FAILED test_known.py::test_builds[vlen128-zvfh]" in r.stdout
    assert "output buffer 0 differs between riscv64_v by gcc14 and its static twin v by gcc14" in r.stdout
    assert "XFAIL test_known.py::test_oracle[vlen128-zvfh]" in r.stdout


@pytest.mark.long(8)
def test_the_planted_difference_between_the_builds_is_caught(tmp_path) -> None:
    """The mutant dispatch_vec_dot_f32_unfused changes only the variant's library (ggml_vec_dot_f32 unfused where
    GGML_BACKEND_DL is defined): within the oracle's bound, so only the comparison with the static twin catches it;
    the exact tests' small integers stay identical."""
    from helpers import gcc14_missing

    from harness.ggml import mutants
    from harness.jobs.mutant_runs import detect
    if gcc14_missing():
        pytest.skip(gcc14_missing())
    row = detect(mutants.get("dispatch_vec_dot_f32_unfused"), max_examples=None, out=tmp_path, timeout=1800,
                 extra=["--vlen", "256"])
    assert row["caught"] is True and row["by_compiler"] == {"gcc14": [1, 2]}, row
    report = next((tmp_path / "dispatch_vec_dot_f32_unfused" / "cases").glob("*/README.md")).read_text()
    assert "OutputsDiffer: vec_dot_f32: output buffer 0 differs between riscv64_v by gcc14 and its static twin" in report
