"""The assembler name of a vector instruction word (RVV 1.0, Zvfh, Zvfbfmin, Zvfbfwma), for the cost mix.

:func:`name` turns a 32-bit word into the mnemonic with its operand form (``vadd.vv``, ``vwmacc.vx``,
``vle8.v``, ``vlseg2e32.v``, ``vredsum.vs``, ``vmv.x.s``...) -- the names per-instruction throughput
tables of real cores use (harness/cost/prices/cores.py) -- and whether it is masked (``v0.t``).  Only
what the price of an instruction depends on is decoded; registers are not.  A word of the vector
opcodes this module does not know (a reserved encoding, an extension it does not list) gets the
name ``v?<major>.<funct6>``, which no table prices (reported as unpriced, never guessed).
"""

from __future__ import annotations

_EEW = {0: 8, 5: 16, 6: 32, 7: 64}

# OPIVV / OPIVX / OPIVI: funct6 -> (base name, forms it has).  Forms: v = .vv, x = .vx, i = .vi.
_OPI = {
    0b000000: ("vadd", "vxi"), 0b000010: ("vsub", "vx"), 0b000011: ("vrsub", "xi"),
    0b000100: ("vminu", "vx"), 0b000101: ("vmin", "vx"), 0b000110: ("vmaxu", "vx"), 0b000111: ("vmax", "vx"),
    0b001001: ("vand", "vxi"), 0b001010: ("vor", "vxi"), 0b001011: ("vxor", "vxi"),
    0b001100: ("vrgather", "vxi"), 0b001110: ("vslideup", "xi"), 0b001111: ("vslidedown", "xi"),
    0b011000: ("vmseq", "vxi"), 0b011001: ("vmsne", "vxi"), 0b011010: ("vmsltu", "vx"),
    0b011011: ("vmslt", "vx"), 0b011100: ("vmsleu", "vxi"), 0b011101: ("vmsle", "vxi"),
    0b011110: ("vmsgtu", "xi"), 0b011111: ("vmsgt", "xi"),
    0b100000: ("vsaddu", "vxi"), 0b100001: ("vsadd", "vxi"), 0b100010: ("vssubu", "vx"), 0b100011: ("vssub", "vx"),
    0b100101: ("vsll", "vxi"), 0b100111: ("vsmul", "vx"), 0b101000: ("vsrl", "vxi"), 0b101001: ("vsra", "vxi"),
    0b101010: ("vssrl", "vxi"), 0b101011: ("vssra", "vxi"),
}
_NARROW = {0b101100: "vnsrl", 0b101101: "vnsra", 0b101110: "vnclipu", 0b101111: "vnclip"}
_CARRY = {0b010000: "vadc", 0b010001: "vmadc", 0b010010: "vsbc", 0b010011: "vmsbc"}

# OPMVV / OPMVX
_OPM = {
    0b001000: "vaaddu", 0b001001: "vaadd", 0b001010: "vasubu", 0b001011: "vasub",
    0b100000: "vdivu", 0b100001: "vdiv", 0b100010: "vremu", 0b100011: "vrem",
    0b100100: "vmulhu", 0b100101: "vmul", 0b100110: "vmulhsu", 0b100111: "vmulh",
    0b101001: "vmadd", 0b101011: "vnmsub", 0b101101: "vmacc", 0b101111: "vnmsac",
    0b110000: "vwaddu", 0b110001: "vwadd", 0b110010: "vwsubu", 0b110011: "vwsub",
    0b111000: "vwmulu", 0b111010: "vwmulsu", 0b111011: "vwmul",
    0b111100: "vwmaccu", 0b111101: "vwmacc", 0b111110: "vwmaccus", 0b111111: "vwmaccsu",
}
_OPM_WIDE_W = {0b110100: "vwaddu", 0b110101: "vwadd", 0b110110: "vwsubu", 0b110111: "vwsub"}  # .wv / .wx
_REDUCE = {0b000000: "vredsum", 0b000001: "vredand", 0b000010: "vredor", 0b000011: "vredxor",
           0b000100: "vredminu", 0b000101: "vredmin", 0b000110: "vredmaxu", 0b000111: "vredmax"}
_MASK_LOGIC = {0b011000: "vmandn", 0b011001: "vmand", 0b011010: "vmor", 0b011011: "vmxor",
               0b011100: "vmorn", 0b011101: "vmnand", 0b011110: "vmnor", 0b011111: "vmxnor"}
_VXUNARY0 = {0b00010: "vzext.vf8", 0b00011: "vsext.vf8", 0b00100: "vzext.vf4", 0b00101: "vsext.vf4",
             0b00110: "vzext.vf2", 0b00111: "vsext.vf2"}
_VMUNARY0 = {0b00001: "vmsbf.m", 0b00010: "vmsof.m", 0b00011: "vmsif.m", 0b10000: "viota.m", 0b10001: "vid.v"}
_VWXUNARY0 = {0b00000: "vmv.x.s", 0b10000: "vcpop.m", 0b10001: "vfirst.m"}

# OPFVV / OPFVF: funct6 -> (name, forms): v = .vv, f = .vf
_OPF = {
    0b000000: ("vfadd", "vf"), 0b000010: ("vfsub", "vf"), 0b000100: ("vfmin", "vf"), 0b000110: ("vfmax", "vf"),
    0b001000: ("vfsgnj", "vf"), 0b001001: ("vfsgnjn", "vf"), 0b001010: ("vfsgnjx", "vf"),
    0b011000: ("vmfeq", "vf"), 0b011001: ("vmfle", "vf"), 0b011011: ("vmflt", "vf"), 0b011100: ("vmfne", "vf"),
    0b011101: ("vmfgt", "f"), 0b011111: ("vmfge", "f"),
    0b100000: ("vfdiv", "vf"), 0b100001: ("vfrdiv", "f"), 0b100100: ("vfmul", "vf"), 0b100111: ("vfrsub", "f"),
    0b101000: ("vfmadd", "vf"), 0b101001: ("vfnmadd", "vf"), 0b101010: ("vfmsub", "vf"), 0b101011: ("vfnmsub", "vf"),
    0b101100: ("vfmacc", "vf"), 0b101101: ("vfnmacc", "vf"), 0b101110: ("vfmsac", "vf"), 0b101111: ("vfnmsac", "vf"),
    0b110000: ("vfwadd", "vf"), 0b110010: ("vfwsub", "vf"), 0b111000: ("vfwmul", "vf"),
    0b111011: ("vfwmaccbf16", "vf"),
    0b111100: ("vfwmacc", "vf"), 0b111101: ("vfwnmacc", "vf"), 0b111110: ("vfwmsac", "vf"), 0b111111: ("vfwnmsac", "vf"),
}
_OPF_WIDE_W = {0b110100: "vfwadd", 0b110110: "vfwsub"}  # .wv / .wf
_FREDUCE = {0b000001: "vfredusum", 0b000011: "vfredosum", 0b000101: "vfredmin", 0b000111: "vfredmax",
            0b110001: "vfwredusum", 0b110011: "vfwredosum"}
_VFUNARY0 = {
    0b00000: "vfcvt.xu.f.v", 0b00001: "vfcvt.x.f.v", 0b00010: "vfcvt.f.xu.v", 0b00011: "vfcvt.f.x.v",
    0b00110: "vfcvt.rtz.xu.f.v", 0b00111: "vfcvt.rtz.x.f.v",
    0b01000: "vfwcvt.xu.f.v", 0b01001: "vfwcvt.x.f.v", 0b01010: "vfwcvt.f.xu.v", 0b01011: "vfwcvt.f.x.v",
    0b01100: "vfwcvt.f.f.v", 0b01101: "vfwcvtbf16.f.f.v", 0b01110: "vfwcvt.rtz.xu.f.v", 0b01111: "vfwcvt.rtz.x.f.v",
    0b10000: "vfncvt.xu.f.w", 0b10001: "vfncvt.x.f.w", 0b10010: "vfncvt.f.xu.w", 0b10011: "vfncvt.f.x.w",
    0b10100: "vfncvt.f.f.w", 0b10101: "vfncvt.rod.f.f.w", 0b10110: "vfncvt.rtz.xu.f.w", 0b10111: "vfncvt.rtz.x.f.w",
    0b11101: "vfncvtbf16.f.f.w",
}
_VFUNARY1 = {0b00000: "vfsqrt.v", 0b00100: "vfrsqrt7.v", 0b00101: "vfrec7.v", 0b10000: "vfclass.v"}


def _unknown(w: int) -> str:
    return f"v?{w & 0x7F:#04x}.{w >> 26:06b}"


def _opi(w: int, f6: int, funct3: int, vm: int) -> str:
    form = {0: "v", 4: "x", 3: "i"}[funct3]
    if f6 == 0b001110 and form == "v":
        return "vrgatherei16.vv"
    if f6 == 0b010111:
        return f"vmv.v.{form}" if vm else f"vmerge.v{form}m"
    if f6 in _CARRY:
        n = _CARRY[f6]
        if n in ("vadc", "vsbc"):
            return f"{n}.v{form}m"
        return f"{n}.v{form}m" if not vm else f"{n}.v{form}"
    if f6 == 0b100111 and form == "i":
        return f"vmv{((w >> 15) & 0x1F) + 1}r.v"
    if f6 in _NARROW:
        return f"{_NARROW[f6]}.w{form}"
    if f6 in (0b110000, 0b110001) and form == "v":
        return ("vwredsumu", "vwredsum")[f6 & 1] + ".vs"
    got = _OPI.get(f6)
    if got and form in got[1]:
        return f"{got[0]}.v{form}"
    return _unknown(w)


def _opm(w: int, f6: int, funct3: int) -> str:
    vs1 = (w >> 15) & 0x1F
    if funct3 == 2:  # OPMVV
        if f6 in _REDUCE:
            return _REDUCE[f6] + ".vs"
        if f6 in _MASK_LOGIC:
            return _MASK_LOGIC[f6] + ".mm"
        if f6 == 0b010000:
            return _VWXUNARY0.get(vs1, _unknown(w))
        if f6 == 0b010010:
            return _VXUNARY0.get(vs1, _unknown(w))
        if f6 == 0b010100:
            return _VMUNARY0.get(vs1, _unknown(w))
        if f6 == 0b010111:
            return "vcompress.vm"
        if f6 in _OPM_WIDE_W:
            return _OPM_WIDE_W[f6] + ".wv"
        if f6 in _OPM and f6 != 0b111110:
            return _OPM[f6] + ".vv"
        return _unknown(w)
    # OPMVX
    if f6 == 0b001110:
        return "vslide1up.vx"
    if f6 == 0b001111:
        return "vslide1down.vx"
    if f6 == 0b010000:
        return "vmv.s.x"
    if f6 in _OPM_WIDE_W:
        return _OPM_WIDE_W[f6] + ".wx"
    if f6 in _OPM:
        return _OPM[f6] + ".vx"
    return _unknown(w)


def _opf(w: int, f6: int, funct3: int, vm: int) -> str:
    vs1 = (w >> 15) & 0x1F
    if funct3 == 1:  # OPFVV
        if f6 in _FREDUCE:
            return _FREDUCE[f6] + ".vs"
        if f6 == 0b010000:
            return "vfmv.f.s" if vs1 == 0 else _unknown(w)
        if f6 == 0b010010:
            return _VFUNARY0.get(vs1, _unknown(w))
        if f6 == 0b010011:
            return _VFUNARY1.get(vs1, _unknown(w))
        if f6 in _OPF_WIDE_W:
            return _OPF_WIDE_W[f6] + ".wv"
        got = _OPF.get(f6)
        return f"{got[0]}.vv" if got and "v" in got[1] else _unknown(w)
    # OPFVF
    if f6 == 0b001110:
        return "vfslide1up.vf"
    if f6 == 0b001111:
        return "vfslide1down.vf"
    if f6 == 0b010000:
        return "vfmv.s.f"
    if f6 == 0b010111:
        return "vfmv.v.f" if vm else "vfmerge.vfm"
    if f6 in _OPF_WIDE_W:
        return _OPF_WIDE_W[f6] + ".wf"
    got = _OPF.get(f6)
    return f"{got[0]}.vf" if got and "f" in got[1] else _unknown(w)


def _memory(w: int, load: bool) -> str:
    eew = _EEW[(w >> 12) & 7]
    nf = ((w >> 29) & 7) + 1
    mop = (w >> 26) & 3
    umop = (w >> 20) & 0x1F
    seg = f"seg{nf}" if nf > 1 else ""
    if mop == 0:
        if umop == 0b01000:
            return f"vl{nf}re{eew}.v" if load else f"vs{nf}r.v"
        if umop == 0b01011:
            return "vlm.v" if load else "vsm.v"
        if umop == 0b10000 and load:
            return f"vl{seg}e{eew}ff.v"
        if umop == 0:
            return f"v{'l' if load else 's'}{seg}e{eew}.v"
        return _unknown(w)
    if mop == 2:
        return f"v{'l' if load else 's'}s{seg}e{eew}.v"
    order = "u" if mop == 1 else "o"
    return f"v{'l' if load else 's'}{order}x{seg}ei{eew}.v"


def name(w: int) -> tuple[str, bool] | None:
    """(mnemonic, masked) of the vector instruction ``w``, or None when ``w`` is not one.

    Masked means executed under ``v0.t``; the forms whose mask operand is an input (``vmerge``,
    ``vadc``, ``vfmerge``...) are named by their ``.vvm`` / ``.vxm`` form and count as unmasked."""
    op = w & 0x7F
    funct3 = (w >> 12) & 7
    if op == 0x57:
        if funct3 == 7:
            if (w >> 31) == 0:
                return "vsetvli", False
            return ("vsetivli" if (w >> 30) == 3 else "vsetvl"), False
        f6 = w >> 26
        vm = (w >> 25) & 1
        if funct3 in (0, 3, 4):
            n = _opi(w, f6, funct3, vm)
        elif funct3 in (2, 6):
            n = _opm(w, f6, funct3)
        else:
            n = _opf(w, f6, funct3, vm)
        mask_input = n.endswith(("vvm", "vxm", "vim", "vfm")) or n.endswith(".vm") or n.startswith("vmv")
        return n, (vm == 0 and not mask_input)
    if op in (0x07, 0x27) and funct3 in _EEW:
        vm = (w >> 25) & 1
        return _memory(w, op == 0x07), vm == 0
    return None
