"""SpacemiT's IME1 under Spike, validated before it judges a kernel (harness/server/spike/smt_ime1.cc,
harness/emulators/spike_ext.py; docs/ime.md says where each rule comes from in SpacemiT's specification).

* The words: LLVM 22 (zig's clang, ``-march=..._xsmtvdot``) assembles every ``smt.vmadot*`` to the word
  this file's encoder makes, the specification's names (``vmadot ...``, as ggml writes them) through
  ``harness/server/spike/ime1_names.h`` to the same words, and it refuses an odd vd or an odd sliding vs1.
* The specification's example, re-expressed (tests/data/ime1/example.c): its 4x4x8 int8 GEMM with B
  packed by strided stores, the vmadot result against its reference loop, at VLEN 256.
* Hand-worked cases: each instruction on register contents whose result is worked out in the case's
  ``why`` (signs, extremes, accumulation, the sliding rows, the register pair, the two-copy units); the
  whole register file after the instruction must equal the one before with exactly those bytes changed.
* Every MAC unit of the specification's table (vl * SEW = 128 ... 4096) at VLEN 128 ... 4096, all 16
  instructions on seeded random registers, against a NumPy GEMM of the same layout.
* What the specification makes illegal (and what is not emulated) traps as an illegal instruction, the
  word in mtval.

A register file goes through tests/data/ime1/runner.c, which executes any word on it under Spike.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from launch import pytest_child

from harness.core import config
from harness.core.proc import Result, execute
from harness.emulators import pool, spike, spike_ext
from harness.emulators import protocol as P
from harness.ggml import source
from harness.toolchain.builds import ensure_built
from harness.toolchain.compilers import compiler

DATA = Path(__file__).resolve().parent / "data" / "ime1"


WHY_NOT = spike_ext.available()
needs_ime1 = pytest.mark.skipif(WHY_NOT is not None, reason=f"SKIPPED: the IME1 checks on Spike did not run: {WHY_NOT}")

# ------------------------------------------------------------------ the words and vtype

#: funct3 bits 13..12 of each sign form: bit 13 = A (vs1) signed, bit 12 = B (vs2) signed (LLVM 22's words).
SIGNS = {"u": 0, "us": 1, "su": 2, "": 3}
NAMES = [f"vmadot{s}{g}" for s in ("", "1", "2", "3") for g in ("", "u", "su", "us")]


def parse(name: str) -> tuple[int, int]:
    """The slide (0 to 3) and the funct3 signs of ``name`` (``vmadot2su``: slide 2, A signed, B unsigned)."""
    m = re.fullmatch(r"vmadot([123]?)(u|us|su|)", name)
    assert m, name
    return int(m[1] or 0), SIGNS[m[2]]


def word(name: str, vd: int = 8, vs1: int = 2, vs2: int = 4) -> int:
    """The instruction word of ``name``: custom-1 (0x2b), bit 7 = 0, vd / 2 in bits 11..8, funct3 signs, vs1,
    vs2, bit 25 = 1, funct6 111000 (111001 with a slide, whose value - 1 is bits 15..14 and whose vs1 / 2 is
    bits 19..16)."""
    slide, signs = parse(name)
    w = 0x2B | (vd // 2) << 8 | signs << 12 | vs2 << 20 | 1 << 25
    if slide:
        return w | 0x39 << 26 | (slide - 1) << 14 | (vs1 // 2) << 16
    return w | 0x38 << 26 | vs1 << 15


def vtype(sew: int = 8, lmul: str = "m1") -> int:
    lmuls = {"m1": 0, "m2": 1, "m4": 2, "m8": 3, "mf8": 5, "mf4": 6, "mf2": 7}
    return {8: 0, 16: 1, 32: 2, 64: 3}[sew] << 3 | lmuls[lmul]


def _text_words(obj: bytes) -> list[int]:
    """The 32-bit words of an ELF64 relocatable's ``.text``."""
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    size, count, names = struct.unpack_from("<HHH", obj, 0x3A)
    sec = [struct.unpack_from("<IIQQQQ", obj, shoff + i * size) for i in range(count)]
    strtab = sec[names][4]
    for name, _kind, _flags, _addr, off, length in sec:
        if obj[strtab + name:obj.index(b"\0", strtab + name)] == b".text":
            return list(struct.unpack_from(f"<{length // 4}I", obj, off))
    raise AssertionError("no .text")


def test_llvm_emits_the_words_the_encoder_makes(tmp_path: Path) -> None:
    """Each smt.* mnemonic and the specification's name for it (through ime1_names.h) assemble to word()."""
    lines, want = [], []
    for name in NAMES:
        odd_vs1 = [(6, 3, 1)] if parse(name)[0] == 0 else []  # the sliding forms need an even vs1
        for vd, vs1, vs2 in [(8, 2, 4), (30, 30, 31), (0, 14, 17), *odd_vs1]:
            for spelling in (f"smt.{name}", name):
                lines.append(f"{spelling} v{vd}, v{vs1}, v{vs2}")
                want.append(word(name, vd, vs1, vs2))
    src = tmp_path / "words.c"
    src.write_text("__asm__(\"" + "\\n".join(lines) + "\");\n")
    cc = compiler("clang").cc
    execute([cc, f"-march={spike_ext.MARCH}", "-include", spike_ext.NAMES, "-c", src, "-o", tmp_path / "w.o"],
            timeout=300).check("assembling the IME1 mnemonics")
    got = _text_words((tmp_path / "w.o").read_bytes())
    assert [f"{w:#010x}" for w in got] == [f"{w:#010x}" for w in want], "\n".join(lines)
    # The pair rules are in the encoding: vd is a 4-bit field (x 2), a sliding vs1 too.
    src.write_text('__asm__("smt.vmadot v3, v0, v1\\nsmt.vmadot1 v2, v1, v1");\n')
    r = execute([cc, f"-march={spike_ext.MARCH}", "-c", src, "-o", tmp_path / "bad.o"], timeout=300)
    assert r.returncode != 0 and r.stderr.count("invalid operand for instruction") == 2, r.stderr


def test_spike_command_loads_the_library() -> None:
    """``with_ime1`` is Spike with ``--extlib`` and the ISA name after zvl<VLEN>b (no Spike needed)."""
    ext = spike.SpikeExtension(Path("/x/libsmtvdot.so"), spike_ext.ISA)
    s = spike.Spike("spike", "test", extensions=(ext,))
    assert s.command(Path("prog"), 256, {"zvfh": True})[:2] == ["spike", "--extlib=/x/libsmtvdot.so"]
    assert s.cpu(256, {"zvfh": True}) == "rv64gcv_zicntr_zvfh_zvl256b_xsmtvdot"
    assert spike.Spike("spike", "test").cpu(256, {}) == "rv64gcv_zicntr_zvl256b"


def test_missing_tools_say_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(spike.SpikeUnavailable, match=r"no .*riscv/extension.h.*ci/setup.sh --spike"):
        spike_ext.headers(spike.Spike(str(tmp_path / "bin" / "spike"), "test"))
    monkeypatch.setattr(spike_ext, "HOST_CXX", "no-such-g++")
    with pytest.raises(spike.SpikeUnavailable, match="apt-get install g\\+\\+"):
        spike_ext._host_cxx()


# ------------------------------------------------------------------ running words under Spike

@pytest.fixture(scope="module")
def runner() -> Path:
    return spike_ext.program(DATA / "runner.c")


def image(vlen: int) -> np.ndarray:
    """32 vector registers of filler bytes (register r, byte i: (37 r + i) mod 251 + 1): a byte an instruction
    must not touch keeps a value no case writes."""
    r, i = np.meshgrid(np.arange(32), np.arange(vlen // 8), indexing="ij")
    return ((37 * r + i) % 251 + 1).astype(np.uint8)


def put(img: np.ndarray, reg: int, values: list[int], dtype: str) -> None:
    """``values`` as ``dtype`` elements from the start of ``reg`` (on into the next registers)."""
    b = np.asarray(values, dtype=dtype).view(np.uint8)
    flat = img.reshape(-1)
    flat[reg * img.shape[1]:reg * img.shape[1] + b.size] = b


def run_words(runner: Path, vlen: int, cases: list[tuple[int, int, int, np.ndarray]],
              emulator: spike.Spike | None = None) -> Result:
    """Run (word, AVL, vtype, registers) cases in one Spike process at ``vlen`` (with IME1 unless ``emulator``)."""
    emu = emulator or spike_ext.with_ime1()
    payload = b"".join(struct.pack("<IIQQ", w, 0, avl, vt) + img.tobytes() for w, avl, vt, img in cases)
    return execute(emu.command(runner, vlen, {}), input=payload, text=False, timeout=300, core_dumps=False)


def results(r: Result, vlen: int, n: int) -> list[np.ndarray]:
    """The register files the runner wrote, one per case; fails with its output when it did not finish."""
    size = 32 * vlen // 8
    assert r.returncode == 0 and len(r.stdout) == n * size, f"exit {r.returncode}: {r.stderr.decode()[-2000:]}"
    return [np.frombuffer(r.stdout[i * size:(i + 1) * size], np.uint8).reshape(32, vlen // 8) for i in range(n)]


# ------------------------------------------------------------------ the specification's example

@needs_ime1
def test_specification_example_at_vlen_256() -> None:
    """The example's computation (tests/data/ime1/example.c): C = A x B, 4x4x8 int8, B packed by strided
    stores, one vmadot at e8 m1, against the reference loop; 200 matrices (all -128, all 127, seeded)."""
    exe = spike_ext.program(DATA / "example.c")
    ran = spike_ext.with_ime1().run_program(exe, 256, {}, timeout=300)
    assert ran.returncode == 0, ran.output
    assert "the vmadot result equals the reference loop" in ran.stdout


# ------------------------------------------------------------------ hand-worked cases


@dataclass(frozen=True)
class Hand:
    """One instruction on registers set by ``before``; ``after`` lists every byte it changes.  At VLEN 256,
    e8, m1, vl 32 (vl * SEW = 256: the 4x4x8 unit, one copy), A = v2 (v2, v3 when sliding) by rows of K = 8,
    B = v4 by columns of K, C = v8 (rows 0-1) and v9 (rows 2-3), int32, row-major."""

    name: str
    word: int
    before: list[tuple[int, str, list[int]]]
    after: list[tuple[int, str, list[int]]]
    why: str
    vlen: int = 256
    avl: int = 32
    vtype: int = field(default_factory=vtype)


def rows(*values: int, k: int = 8) -> list[int]:
    """A matrix whose row r holds ``values[r]`` in all its ``k`` columns (A by rows; B by columns)."""
    return [v for v in values for _ in range(k)]


ZERO_C = (8, "i4", [0] * 16)
HAND = [
    Hand("vmadot: -128 x -128", word("vmadot"), [(2, "i1", [-128] * 32), (4, "i1", [-128] * 32), ZERO_C],
         [(8, "i4", [131072] * 16)], "every C[i][j] = 8 x (-128)(-128) = 8 x 16384 = 131072"),
    Hand("vmadotu: 255 x 255", word("vmadotu"), [(2, "u1", [255] * 32), (4, "u1", [255] * 32), ZERO_C],
         [(8, "i4", [520200] * 16)], "8 x 255 x 255 = 8 x 65025 = 520200"),
    *(Hand(f"{name}: bytes 0xff x 0x80", word(name), [(2, "u1", [0xFF] * 32), (4, "u1", [0x80] * 32), ZERO_C],
           [(8, "i4", [value] * 16)], why) for name, value, why in [
        ("vmadot", 1024, "A = -1, B = -128 (both signed): 8 x 128 = 1024"),
        ("vmadotu", 261120, "A = 255, B = 128 (both unsigned): 8 x 32640 = 261120"),
        ("vmadotsu", -1024, "A = -1 (signed), B = 128 (unsigned): 8 x -128 = -1024"),
        ("vmadotus", -261120, "A = 255 (unsigned), B = -128 (signed): 8 x -32640 = -261120")]),
    Hand("vmadot: rows of A, columns of B, C accumulated", word("vmadot"),
         [(2, "i1", [int(k == i) for i in range(4) for k in range(8)]),
          (4, "i1", [10 * k + j for j in range(4) for k in range(8)]), (8, "i4", [1000] * 16)],
         [(8, "i4", [1000, 1001, 1002, 1003, 1010, 1011, 1012, 1013, 1020, 1021, 1022, 1023, 1030, 1031, 1032, 1033])],
         "A[i][k] = 1 if k == i (row i of A is 8 bytes from 8i), B[k][j] = 10k + j stored by columns "
         "(column j is bytes 8j..8j+7): A x B picks row i of B, C[i][j] = 1000 + 10i + j; rows 0-1 in v8, 2-3 in v9"),
    Hand("vmadot: int32 accumulation wraps", word("vmadot"), [(2, "i1", [1] * 32), (4, "i1", [1] * 32),
                                                             (8, "i4", [2147483640] * 16)],
         [(8, "i4", [-2147483648] * 16)], "(2^31 - 8) + 8 = 2^31, which wraps to -2^31 (assumed: modulo 2^32)"),
    *(Hand(f"{name}: rows {s}..{s + 3} of v2:v3", word(name), [(2, "i1", rows(1, 2, 3, 4, 5, 6, 7, 8)),
                                                              (4, "i1", [1] * 32), ZERO_C],
           [(8, "i4", rows(*(8 * (s + i + 1) for i in range(4)), k=4))],
           f"row r of the pair v2:v3 holds r + 1, B is all ones: C row i = 8 x (row {s} + i's value) = 8 x ({s} + i + 1)")
      for s, name in enumerate(["vmadot", "vmadot1", "vmadot2", "vmadot3"])),
    Hand("vmadot1su: slide 1, A signed, B unsigned", word("vmadot1su"),
         [(2, "i1", rows(-1, -2, -3, -4, -5, -6, -7, -8)), (4, "u1", [255] * 32), ZERO_C],
         [(8, "i4", rows(-4080, -6120, -8160, -10200, k=4))], "rows 1..4 hold -2..-5: 8 x 255 x -(i + 2) = -2040 (i + 2)"),
    Hand("vmadot2us: slide 2, A unsigned, B signed", word("vmadot2us"),
         [(2, "u1", rows(240, 241, 242, 243, 244, 245, 246, 247)), (4, "i1", [-1] * 32), ZERO_C],
         [(8, "i4", rows(-1936, -1944, -1952, -1960, k=4))], "rows 2..5 hold 242..245: 8 x -1 x (242 + i)"),
    Hand("vmadot3u: slide 3, both unsigned", word("vmadot3u"),
         [(2, "u1", rows(248, 249, 250, 251, 252, 253, 254, 255)), (4, "u1", [2] * 32), ZERO_C],
         [(8, "i4", rows(4016, 4032, 4048, 4064, k=4))], "rows 3..6 hold 251..254: 8 x 2 x (251 + i)"),
    Hand("vmadot v30, v3, v5: any vs1, the pair v30:v31, nothing else", word("vmadot", 30, 3, 5),
         [(3, "i1", [2] * 32), (5, "i1", [3] * 32), (30, "i4", [0] * 16)], [(30, "i4", [48] * 16)],
         "8 x 2 x 3 = 48 in v30 and v31; v2, v4, v8, v9 and the rest keep their bytes"),
    Hand("vmadot at vl * SEW = 128 on VLEN 256: 2x2x4, two copies", word("vmadot"),
         [(2, "i1", rows(1, 2, 3, 4, k=4)), (4, "i1", [1] * 16), (8, "i4", [0] * 4), (9, "i4", [0] * 4)],
         [(8, "i4", [4, 4, 12, 12]), (9, "i4", [8, 8, 16, 16])],
         "vl 16: A copy 0 = rows 1, 2 and copy 1 = rows 3, 4 (4 bytes each), B all ones: C rows 4, 8 and 12, 16; "
         "v8 = row 0 of each copy, v9 = row 1; bytes 16..31 of v8, v9 (tail) and of v2, v4 unread, unchanged",
         avl=16),
    Hand("vmadot at VLEN 512: 4x4x8, two copies", word("vmadot"),
         [(2, "i1", rows(1, 2, 3, 4, 10, 20, 30, 40)), (4, "i1", [1] * 32 + [2] * 32), (8, "i4", [0] * 32)],
         [(8, "i4", rows(8, 16, 160, 320, k=4)), (9, "i4", rows(24, 32, 480, 640, k=4))],
         "vl 64: copy 0's A rows 1..4 and B ones give 8(i + 1); copy 1's rows 10..40 and B twos give 160(i + 1); "
         "figure int-matrix-multiply-1: v8 = rows 0-1 of copy 0 then of copy 1, v9 = rows 2-3 of each",
         vlen=512, avl=64),
    Hand("vmadot1 at VLEN 512: each copy slides in its own blocks", word("vmadot1"),
         [(2, "i1", rows(1, 2, 3, 4, 11, 12, 13, 14)), (3, "i1", rows(5, 6, 7, 8, 15, 16, 17, 18)),
          (4, "i1", [1] * 64), (8, "i4", [0] * 32)],
         [(8, "i4", rows(16, 24, 96, 104, k=4)), (9, "i4", rows(32, 40, 112, 120, k=4))],
         "copy c's 8 rows are its block of v2 then its block of v3 (figure int-slide-window-1): slide 1 takes "
         "2..5 (copy 0) and 12..15 (copy 1), times 8",
         vlen=512, avl=64),
]


@needs_ime1
@pytest.mark.parametrize("case", HAND, ids=[c.name for c in HAND])
def test_hand_worked(runner: Path, case: Hand) -> None:
    img = image(case.vlen)
    for reg, dtype, values in case.before:
        put(img, reg, values, dtype)
    want = img.copy()
    for reg, dtype, values in case.after:
        put(want, reg, values, dtype)
    (got,) = results(run_words(runner, case.vlen, [(case.word, case.avl, case.vtype, img)]), case.vlen, 1)
    changed = sorted({int(r) for r in np.nonzero((got != want).any(axis=1))[0]})
    assert not changed, (f"{case.name}: registers {changed} differ; {case.why}\n" + "\n".join(
        f"v{r}: got {got[r].view('<i4').tolist()}, want {want[r].view('<i4').tolist()}" for r in changed))


# ------------------------------------------------------------------ every MAC unit, on random registers

#: The specification's "MAC unit for different vl and SEW" table, SEW = 8: vl * SEW -> (M = N, K, copies).
MAC_UNITS = {128: (2, 4, 2), 256: (4, 8, 1), 512: (4, 8, 2), 1024: (8, 16, 1), 2048: (8, 16, 2), 4096: (16, 32, 1)}


def model(img: np.ndarray, name: str, vl: int, vd: int = 8, vs1: int = 2, vs2: int = 4) -> np.ndarray:
    """The registers after ``name`` at e8 and ``vl``, as NumPy reads the specification: per copy, C (M x N) +=
    A (M x K rows, after the slide) x B (K x N, stored by columns), int32 wrapping."""
    m_, k, copies = MAC_UNITS[vl * 8]
    slide, signs = parse(name)
    a_type, b_type = ("i1" if signs & 2 else "u1"), ("i1" if signs & 1 else "u1")
    out, half, n = img.copy(), m_ // 2, m_
    for cp in range(copies):
        block = slice(cp * m_ * k, (cp + 1) * m_ * k)
        pair = [img[vs1, block], *([img[vs1 + 1, block]] if slide else [])]
        a = np.concatenate(pair).view(a_type).reshape(-1, k)[slide:slide + m_]
        b = img[vs2, cp * k * n:(cp + 1) * k * n].view(b_type).reshape(n, k)
        prod = a.astype(np.int64) @ b.astype(np.int64).T
        for h in (0, 1):
            c = out[vd + h].view("<i4")[cp * half * n:(cp + 1) * half * n]
            c[:] = ((c.astype(np.int64) + prod[h * half:(h + 1) * half].ravel()) % 2**32).astype(np.uint32).view("<i4")
    return out


@needs_ime1
@pytest.mark.parametrize("vlen", [128, 256, 512, 1024, 2048, 4096])
def test_every_mac_unit(runner: Path, vlen: int) -> None:
    """Each vl * SEW of the table up to VLEN (e8, m1; and vl = VLMAX at mf2), all 16 instructions (but a slide
    of more than M rows), random registers, against :func:`model`."""
    rng = np.random.default_rng(vlen)
    cases, names, want = [], [], []
    settings = [(bits // 8, vtype(8, "m1")) for bits in MAC_UNITS if bits <= vlen]
    settings += [(vlen // 16, vtype(8, "mf2"))] if vlen > 128 else []
    for avl, vt in settings:
        for name in (n for n in NAMES if parse(n)[0] <= MAC_UNITS[avl * 8][0]):  # a slide > M: test_illegal
            img = rng.integers(0, 256, size=(32, vlen // 8), dtype=np.uint8)
            cases.append((word(name), avl, vt, img))
            names.append(name)
            want.append(model(img, name, avl))
    got = results(run_words(runner, vlen, cases), vlen, len(cases))
    bad = [f"{names[i]} at vl {cases[i][1]}" for i in range(len(cases)) if not np.array_equal(got[i], want[i])]
    assert not bad, f"VLEN {vlen}: {len(bad)} / {len(cases)} differ from the model: {bad[:8]}"


# ------------------------------------------------------------------ illegal


ILLEGAL = [
    ("LMUL 2", word("vmadot"), 32, vtype(8, "m2"), "Programmer's Model: only LMUL <= 1"),
    ("SEW 32", word("vmadot"), 8, vtype(32), "Programmer's Model: SEW is 4, 8 or 16 only"),
    ("SEW 16", word("vmadotu"), 16, vtype(16), "not emulated: int16 accumulates in fp32, no rounding given"),
    ("vl * SEW = 192", word("vmadot"), 24, vtype(), "no MAC unit for it: illegal instruction"),
    ("vl * SEW = 64", word("vmadot1"), 8, vtype(), "below the table's 128: no MAC unit"),
    ("vl = 0", word("vmadot"), 0, vtype(), "no MAC unit for vl * SEW = 0 (assumption)"),
    ("vmadot3 on the 2x2x4 unit", word("vmadot3"), 16, vtype(), "slide 3 + row 1 = row 4 of 4 (assumption)"),
    ("vill", word("vmadot"), 32, 1 << 63, "vtype invalid: as every vector instruction"),
    ("register slide (vmadotn, bit 25 = 0)", word("vmadot1") & ~(1 << 25), 32, vtype(), "not emulated"),
    ("slide code 11", word("vmadot1") | 3 << 14, 32, vtype(), "no slide 4 in the format"),
    ("funct3 bit 14 without slide", word("vmadot") | 1 << 14, 32, vtype(), "undefined in the format"),
    ("bit 7 set", word("vmadot") | 1 << 7, 32, vtype(), "the format has 0 there"),
]


@needs_ime1
@pytest.mark.parametrize("name, w, avl, vt, why", ILLEGAL, ids=[c[0] for c in ILLEGAL])
def test_illegal(runner: Path, name: str, w: int, avl: int, vt: int, why: str) -> None:
    assert_illegal(run_words(runner, 256, [(w, avl, vt, image(256))]), w, f"{name} ({why})")


@needs_ime1
def test_without_the_library_vmadot_is_illegal(runner: Path) -> None:
    """Plain Spike (no --extlib, no _xsmtvdot): a correct vmadot word is an illegal instruction."""
    w = word("vmadot")
    assert_illegal(run_words(runner, 256, [(w, 32, vtype(), image(256))], emulator=spike.spike()), w, "plain Spike")


def assert_illegal(r: Result, w: int, what: str) -> None:
    err = r.stderr.decode()
    assert r.returncode == 132 and "illegal instruction" in err and f"mtval 0x{w:016x}" in err, \
        f"{what}: exit {r.returncode}, but should trap as an illegal instruction on {w:#010x}: {err[-1000:]}"


# ------------------------------------------------------------------ the spacemit build under Spike

def _spacemit_stand_in() -> SimpleNamespace:
    """What Spike.for_build reads of a build: its ISA build and the tree's -march (the pinned tree's)."""
    return SimpleNamespace(isa=config.SPACEMIT, march="rv64gcv_zfh_zvfh_zicbop_zihintpause_zba")


def test_spike_runs_the_spacemit_build_as_its_core() -> None:
    """Offered IME1 (what --emulator spike is), Spike runs the spacemit build with the library, the A60's core type
    and the -march's extras, its environment in --bootargs and the program last; without the offer, the X60's."""
    ext = spike.SpikeExtension(Path("/x/libsmtvdot.so"), spike_ext.ISA)
    build = _spacemit_stand_in()
    a60 = spike.Spike("spike", "test", matrix=(ext,)).for_build(build)
    argv = a60.command(Path("server"), 256, {"zvfh": True})
    assert argv[1] == "--extlib=/x/libsmtvdot.so" and argv[-1] == "server"
    assert a60.cpu(256, {"zvfh": True}) == "rv64gcv_zicntr_zba_zvfh_zvl256b_xsmtvdot"  # zicbop, zihintpause: hints
    # SPIKE_ONLINE_CPUS: the K1's eight cores reported online by the runtime (the backend before 2026-05 sizes its
    # IME work by the CPU count and computes nothing on one)
    assert "--bootargs=rvvdiff-env SPACEMIT_CORE_ARCH=0xA03C SPACEMIT_MEM_BACKEND=POSIX SPIKE_ONLINE_CPUS=8" in argv
    x60 = spike.Spike("spike", "test").for_build(build)
    assert x60.extensions == () and dict(x60.env)["SPACEMIT_CORE_ARCH"] == "0x503C"
    plain = SimpleNamespace(isa=config.ISA_BUILDS["zvfh"], march="rv64gcv_zfh_zvfh")
    offered = spike.Spike("spike", "test", matrix=(ext,)).for_build(plain)
    assert offered.extensions == () and offered.env == () and offered.bootargs() == []


def _spacemit_server(emu: spike.Spike, isa: config.IsaBuild = config.SPACEMIT) -> pool.KernelServer:
    build = ensure_built(source.pinned(), config.SPACEMIT)
    return pool.KernelServer(dataclasses.replace(build, isa=isa), 256, False, emu)


Q4_0_GEMV = ([2, 64, 16, 1, 1, 2, 1], [], [P.In(bytes(16 * 2 * 18)), P.In(np.ones(64, np.float32)), P.Out(64)])


@needs_ime1
def test_the_runtime_hands_the_backend_its_environment() -> None:
    """The SpacemiT backend sees its environment (rt.c reads Spike's bootargs): the A60 with the library (IME1 on,
    weights in its buffer type), the X60 without (IME1 off, weights in the CPU buffer); the memory pool POSIX."""
    for emu, ime, weights in ((spike_ext.offering(spike.spike()), "1", "CPU_RISCV64_SPACEMIT"),
                              (spike.spike(), "0", "CPU")):
        s = _spacemit_server(emu)
        try:
            r = s.call("repack_mul_mat", *Q4_0_GEMV)
            said = s.stderr_head(4000).decode()
        finally:
            s.stop()
        assert f"use_ime1: {ime}" in said and "mem_backend: POSIX" in said, said
        assert f"weights={weights}" in r.message


@needs_ime1
def test_the_ime1_path_executes_vmadot() -> None:
    """The A60's core type on a Spike without the library: the same mul_mat dies of an illegal instruction in the
    IME1 kernel, the vmadot word in mtval (so with the library, vmadot is what runs)."""
    a60 = dataclasses.replace(config.SPACEMIT, env={**config.SPACEMIT.env, **config.SPACEMIT.matrix_env})
    s = _spacemit_server(spike.spike(), a60)
    try:
        with pytest.raises(pool.KernelCrash, match=r"SIGILL|illegal instruction") as e:
            s.call("repack_mul_mat", *Q4_0_GEMV)
    finally:
        s.stop()
    assert "gemm_kernel_i8i4" in str(e.value) or "SQ4BitGemm" in str(e.value), str(e.value)


@needs_ime1
def test_the_ime1_gemm_family_runs_here(tmp_path: Path) -> None:
    """The IME1 GEMM family (cases/test_spacemit_gemm.py) runs in the project's tests, since the main job runs under
    QEMU, where it skips: at VLEN 256 on Spike with the library, every test passes but the two known failures
    (q4_1's and q4_K's zero points: harness/data/known_failures.toml)."""
    r = pytest_child("cases/test_spacemit_gemm.py", "--emulator", "spike", "--isa", "spacemit", "--vlen", "256",
                     "-p", "no:xdist", "--report-dir", str(tmp_path))
    assert re.search(r"\b9 passed, 2 xfailed\b", r.stdout), r.stdout[-2000:]
