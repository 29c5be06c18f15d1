"""The SpacemiT direct-call reproducers (harness/upstream/spacemit_direct.py) and their issue texts (direct.py).

The writers are checked on made-up cases of the shape the kernel server's adapters record; the texts on made-up
verdicts; one end-to-end run builds the quantizer's program against the pinned tree's spacemit build and runs it
under QEMU at the VLEN where it is wrong and at one where the RVV path is taken (right).
"""

from __future__ import annotations

import re
import types
from pathlib import Path

import numpy as np
import pytest

from harness.core.matrix import can_make
from harness.ggml import fix_catalogue, known, source
from harness.upstream import direct, public, public_base, runs, spacemit_direct, wording
from harness.upstream.issue import MAX_LINES

SM = spacemit_direct


def _case(kernel: str, ip: list[int], fp: list[float] = (), **arrays: np.ndarray) -> types.SimpleNamespace:
    return types.SimpleNamespace(call={"kernel": kernel, "ip": list(ip), "fp": list(fp)}, arrays=arrays)


def _quant_case(nonzero: bool = False) -> types.SimpleNamespace:
    row = np.zeros(128, np.uint8)
    row[5] = 7 if nonzero else 0
    return _case("spacemit_quantize", [0, 32, 32], buf0=row)


def _fa_case() -> types.SimpleNamespace:
    b = {f"buf{i}": np.full(n, i + 1, np.uint8) for i, n in enumerate((512, 1024, 1024, 16))}
    return _case("spacemit_fa", [0, 262144, 1, 1, 64, 64, 1, 8, 2, 1, 1, 1], [0.125, 8.0, 0.0], **b,
                 buf4=np.zeros(0, np.uint8), expected=np.linspace(-1, 1, 128), bound=np.full(128, 0.005))


def test_every_spacemit_fix_without_public_form_has_a_program() -> None:
    """The six SpacemiT findings no public op reaches each have a program, and each program's reason is the one
    public_base.py keeps for the kernel its case calls, the one public.py's ``public_form`` raises."""
    fixes = {f for f in fix_catalogue.catalogue() if f.startswith("spacemit_")}
    assert set(SM.PROGRAMS) <= fixes
    for fix, prog in SM.PROGRAMS.items():
        assert SM.why(fix) == public_base.SPACEMIT_DIRECT[prog.kernel]
        call = types.SimpleNamespace(call={"kernel": prog.kernel, "ip": [], "buffers": []}, arrays={}, data={})
        with pytest.raises(public_base.NoPublicForm, match="^" + re.escape(SM.why(fix)) + "$"):
            public.public_form(call, {})
        entry = next(k for k in known.load() if k.fix == fix and not k.seen_in)
        test = {"spacemit_quantize": "test_spacemit_quant.py", "spacemit_repack": "test_spacemit_layouts.py",
                "spacemit_fa": "test_spacemit_fa.py"}[prog.kernel]
        assert f"cases/{test}::" in entry.reproducer, (fix, entry.reproducer)


def test_the_quantizer_program_calls_the_function_by_its_header_on_a_zero_row() -> None:
    src = SM.PROGRAMS["spacemit_quantize_ref_zero_block"].write(_quant_case())
    assert '#include "spacemit/rvv_kernels.h"' in src
    assert "K::rvv::quantize_a_row_i8(BLK_LEN, a, COUNT_K, out);" in src and "COUNT_K = 32" in src
    assert "q8_blk_size(BLK_LEN, true)" in src and "return bad != 0;" in src
    hp = SM.PROGRAMS["spacemit_quantize_hp_ref_zero_block"].write(
        _case("spacemit_quantize", [2, 256, 256], buf0=np.zeros(1024, np.uint8)))
    assert "quantize_a_row_i8_hp(" in hp and "q8_hp_blk_size(BLK_LEN, true, true)" in hp
    with pytest.raises(SM.NoProgram, match="all-zero"):  # its check (every byte 0) holds for a zero row only
        SM.PROGRAMS["spacemit_quantize_ref_zero_block"].write(_quant_case(nonzero=True))


def test_the_repack_programs_carry_the_case_bytes_and_check_what_the_finding_breaks() -> None:
    src = bytes(range(256)) * 4 + bytes(132)
    q8 = SM.PROGRAMS["spacemit_repack_expert_row_padding"].write(
        _case("spacemit_repack", [8, 32, 32, 32, 17, 2], buf0=np.frombuffer(src[:1156], np.uint8)))
    assert "repack<block_q8_0, 32, 32>(ggml_tensor *, const void *, size_t);" in q8
    assert "ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 32, 17, 2)" in q8 and "static unsigned char src[1156]" in q8
    assert "ggml_backend_buft_get_alloc_size(ggml_backend_cpu_riscv64_spacemit_buffer_type(), t)" in q8
    assert "return past != 0;" in q8 and "0001020304" in q8
    q6 = SM.PROGRAMS["spacemit_repack_q6_K_zero_subblock"].write(
        _case("spacemit_repack", [14, 32, 32, 256, 32, 1], buf0=np.zeros(6720, np.uint8)))
    assert "repack<block_q6_K, 32, 32>" in q6 and '"00*6720"' in q6
    assert "(32 * 2 + 32 * 32)" in q6 and "return bad != 0;" in q6


def test_the_attention_program_gives_the_kernel_a_tcm_and_the_case_inputs() -> None:
    src = SM.PROGRAMS["spacemit_fa_mrow_alibi_slope"].write(_fa_case())
    assert "static unsigned char tcm[262144];" in src
    assert "forward_flash_attn_ext_f16_one_chunk_vlen1024_vf16(&params, out, 0, 2, tcm, sizeof(tcm));" in src
    assert "ggml_flash_attn_ext(ctx, q, k, v, mask, 0.125f, 8.0f, 0.0f);" in src
    assert "static const double expected[128]" in src and "static const double bound[128]" in src
    assert SM.PROGRAMS["spacemit_fa_mrow_alibi_slope"].vlens == (1024,)
    tiled = _fa_case()
    tiled.call["ip"][0] = 1
    with pytest.raises(SM.NoProgram, match="one-chunk"):
        SM.PROGRAMS["spacemit_fa_mrow_max_init"].write(tiled)


def test_the_printed_commands_build_the_spacemit_libraries_and_link_the_program() -> None:
    lines = SM.body_lines(source.pinned(), 128)
    assert lines[0].startswith("cmake -S llama.cpp -B rv ") and "-DGGML_CPU_RISCV64_SPACEMIT=ON" in lines[0]
    assert '"-DCMAKE_CXX_FLAGS=' in lines[0] and "$PWD/spacemit_ime1" in lines[0]
    assert lines[1] == "cmake --build rv --target ggml-cpu ggml-base -j2"
    assert "-Illama.cpp/ggml/src/ggml-cpu" in lines[2]
    assert "repro.cpp rv/ggml/src/libggml-cpu.a rv/ggml/src/libggml-base.a" in lines[2]
    assert lines[3].startswith("env SPACEMIT_CORE_ARCH=0x503C SPACEMIT_MEM_BACKEND=POSIX qemu-riscv64 -cpu rv64,v=true,vlen=128")
    assert not any(str(source.pinned().root) in ln for ln in lines)


def _verdicts(wrong: set[int]) -> list[runs.Verdict]:
    out = []
    for t in ("pinned", "fixed"):
        for vl in (128, 256, 512, 1024):
            bad = t == "pinned" and vl in wrong
            out.append(runs.Verdict(t, "spacemit", vl, bad, ("byte 4 = 0x20, expected 0\n" if bad else "")
                                    + f"VLEN {vl}: {int(bad)} of 38 output bytes not 0", "qemu", "clang"))
            out.append(runs.Verdict(t, "spacemit", vl, None, "not built: GCC 14 cannot make the spacemit build",
                                    "qemu", "gcc14"))
    return out


@pytest.mark.parametrize("fix", sorted(SM.PROGRAMS))
def test_the_issue_text_of_each_finding(fix: str) -> None:
    """The text says why there is no public program, shows (or attaches) repro.cpp, prints the commands and the table
    with the VLENs where it was wrong; it fits the line limit and passes the wording check."""
    pinned = source.pinned()
    entry = next(k for k in known.load() if k.fix == fix and not k.seen_in)
    fa = SM.PROGRAMS[fix].vlens == (1024,)
    src = SM.PROGRAMS[fix].write(_fa_case() if fa else _case(
        "spacemit_repack" if "repack" in fix else "spacemit_quantize",
        [8, 32, 32, 32, 17, 2] if "expert" in fix else [14, 32, 32, 256, 32, 1] if "repack" in fix else [0, 32, 32],
        buf0=np.zeros(1156 if "expert" in fix else 6720 if "repack" in fix else 128, np.uint8)))
    text = direct.direct_issue(fix, {"label": pinned.label, "commit": pinned.commit}, _verdicts({128, 512}), entry,
                               SM.why(fix), src)
    assert SM.why(fix)[1:60] in text and "**Why no public reproducer.**" in text
    said = "a write past the allocation" if "expert" in fix else "wrong result"
    assert f"{said} at VLEN 128, 512, spacemit build with clang" in text, text.splitlines()[0]
    assert "| pinned | clang | spacemit | wrong | ok | wrong | ok |" in text
    assert "| fixed | clang | spacemit | ok | ok | ok | ok |" in text
    assert "env SPACEMIT_CORE_ARCH=0x503C" in text and "`repro.cpp`" in text and "`repro.c`" not in text
    assert len(text.splitlines()) <= MAX_LINES, len(text.splitlines())
    assert ("```cpp" in text) == (len(src.splitlines()) < 30), fix  # a long program is attached, not shown
    assert wording.defects(text) == [], wording.defects(text)


@pytest.mark.skipif(not can_make("clang", "spacemit"), reason="no clang spacemit build here")
def test_the_quantizer_program_is_wrong_at_vlen_128_and_right_at_256(tmp_path: Path) -> None:
    """End to end on the pinned tree's spacemit build (cached by the suite's other spacemit tests): VLEN 128 takes
    the scalar reference path with the finding, VLEN 256 the RVV path."""
    fix = "spacemit_quantize_ref_zero_block"
    src = SM.PROGRAMS[fix].write(_quant_case())
    got = {v.vlen: v for v in SM.verify(fix, src, {"pinned": source.pinned()}, ["clang"], (128, 256), tmp_path)}
    assert got[128].failing is True and "byte 4 = 0x20, expected 0" in got[128].text, got[128].text
    assert got[256].failing is False and "0 of 38 output bytes not 0" in got[256].text, got[256].text
