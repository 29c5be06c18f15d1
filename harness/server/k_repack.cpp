// Kernel family: weight repacking (ggml-cpu/repack.cpp) and the repacked GEMV / GEMM kernels
// (ggml-cpu/arch/riscv/repack.cpp).  Python side: cases/repack_cases.py (the table: which layout,
// which kernels, what every parameter means) and cases/test_repack_*.py; the NumPy layouts are
// oracles/repack.py.
//
// Three ways in, from the most to the least like llama.cpp:
//
//   repack_buffer / repack_mul_mat / repack_mul_mat_id  the CPU_REPACK extra buffer type, found through the backend
//       registry (ggml_backend_dev_get_extra_bufts): allocating a tensor there runs ggml's own
//       selection (ggml_repack_get_optimal_repack_type, through the buffer's init_tensor), and
//       ggml_backend_tensor_set runs its repack.  mul_mat then dispatches to the repacked
//       GEMV / GEMM through the extra buffer's tensor traits, as in a model (mul_mat_id, the
//       mixture-of-experts product, through forward_mul_mat_id's GEMV per expert row).
//       Placement 2 is the same with SpacemiT's extra buffer type (CPU_RISCV64_SPACEMIT, the spacemit
//       build): its selection (ggml_riscv64_spacemit_get_optimal_repack_type) and repack, then its IME
//       GEMMs (cases/spacemit_gemm.py).
//   repack_layout  ggml's repack code for one layout, called directly: the explicit
//       specialisations ggml::cpu::repack::repack<block, INTER_SIZE, NB_COLS> have external
//       linkage, so a layout the selection never picks at this VLEN (or at any: q4_0 8x8 on
//       RISC-V) is still produced by the tree's code, not by ours.
//   repack_gemx / repack_quantize_mat  the GEMV / GEMM entry points and the activation
//       quantizers (declared in repack.h), called as forward_mul_mat calls them.
//
// The repacked weights of repack_mul_mat are copied into guarded memory (GUARD_BYTE_IN, 0xFF)
// before the graph runs, so an over-read of the weights meets NaN scales.

#include "server.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "repack.h"
#include "traits.h"

#include <cxxabi.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <typeinfo>

// The repack entry points ggml instantiates (repack.cpp): declared here, defined by ggml.  Which
// ones, and under which conditions, is generated from the tree (harness/bindings.py).
namespace ggml::cpu::repack {
template <typename BLOC_TYPE, int64_t INTER_SIZE, int64_t NB_COLS>
int repack(struct ggml_tensor *, const void *, size_t);
#include "rvvdiff_repack_decls.inc"
}  // namespace ggml::cpu::repack

namespace {

using namespace rvvdiff;
namespace R = ggml::cpu::repack;

using RepackFn = int (*)(ggml_tensor *, const void *, size_t);
using GemFn = void (*)(int, float *, size_t, const void *, const void *, int, int);
using QuantizeMatFn = void (*)(const float *, void *, int64_t);

// One interleaved layout the tree has on RISC-V and the kernels that read it.
struct Layout {
    const char * name;
    ggml_type type;
    int inter;  // INTER_SIZE: bytes taken from each row in turn
    int cols;   // NB_COLS: rows of the weight matrix interleaved into one block
    size_t xbytes;  // sizeof the interleaved block
    RepackFn repack;
    GemFn gemv, gemm, gemv_generic, gemm_generic;
};

// Every layout with an RVV GEMV in the tree's arch/riscv/repack.cpp (generated: harness/bindings.py).
const Layout LAYOUTS[] = {
#include "rvvdiff_repack_layouts.inc"
};

const Layout * find_layout(Call & c, int64_t type, int64_t inter, int64_t cols) {
    for (const Layout & l : LAYOUTS) {
        if (l.type == type && l.inter == inter && l.cols == cols) return &l;
    }
    c.bad("%s: no %lldx%lld layout of ggml type %lld in this build (see repack_info)", c.name.c_str(), (long long)cols,
          (long long)inter, (long long)type);
    return nullptr;
}

// The activation quantizers forward_mul_mat uses for groups of 4 rows (ggml_quantize_mat_t).
struct QuantizeMat {
    ggml_type type;
    int inter;
    QuantizeMatFn fn;
};

const QuantizeMat QUANTIZE_MATS[] = {
#include "rvvdiff_quantize_mats.inc"
};

bool valid_type(int64_t t) { return t >= 0 && t < GGML_TYPE_COUNT && ggml_get_type_traits((ggml_type)t)->blck_size > 0; }

// A small no-alloc context for the tensors of one call.
struct Ctx {
    ggml_context * ctx;
    explicit Ctx(size_t n_tensors) {
        ggml_init_params p = {ggml_tensor_overhead() * n_tensors + ggml_graph_overhead(), nullptr, true};
        ctx = ggml_init(p);
    }
    ~Ctx() { ggml_free(ctx); }
    Ctx(const Ctx &) = delete;
    Ctx & operator=(const Ctx &) = delete;
};

// An extra buffer type of the CPU device by name, as llama.cpp finds them (ggml_backend_dev_get_extra_bufts).
ggml_backend_buffer_type_t extra_buft(const char * name) {
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    auto get_extra = (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    if (!get_extra) return nullptr;
    for (ggml_backend_buffer_type_t * b = get_extra(ggml_backend_reg_dev_get(reg, 0)); b && *b; ++b) {
        if (strcmp(ggml_backend_buft_name(*b), name) == 0) return *b;
    }
    return nullptr;
}

ggml_backend_buffer_type_t repack_buft() { return extra_buft("CPU_REPACK"); }

// The extra buffer type of a weight placement (run_weights_op): 1 CPU_REPACK, 2 SpacemiT's.
const char * const PLACEMENTS[] = {"CPU", "CPU_REPACK", "CPU_RISCV64_SPACEMIT"};

// The class of the tensor traits ggml attached to a tensor (what the selection chose), demangled:
// "ggml::cpu::repack::tensor_traits<block_q4_0, 1l, 16l, (ggml_type)8>", or "none".
std::string traits_name(const ggml_tensor * t) {
    if (t->extra == nullptr) return "none";
    const auto * tt = static_cast<const ggml::cpu::tensor_traits *>(t->extra);
    const char * mangled = typeid(*tt).name();
    int status = 0;
    char * d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string out = status == 0 && d ? d : mangled;
    free(d);
    return out;
}

// A weight tensor [k, m] of `type` allocated the way llama.cpp places a mul_mat weight: in
// CPU_REPACK if the device supports the mul_mat with it there (which asks ggml's selection),
// else in the plain CPU buffer.  Notes what happened.
struct Weights {
    Ctx c{2};
    ggml_tensor * t = nullptr;
    ggml_backend_buffer_t buffer = nullptr;
    bool traits = false;     // the selection attached repack traits
    bool supported = false;  // the device runs mul_mat with these weights in place

    Weights(const Weights &) = delete;
    Weights & operator=(const Weights &) = delete;
    Weights() = default;
    ~Weights() {
        if (buffer) ggml_backend_buffer_free(buffer);
    }

    // Allocates in CPU_REPACK and reports the selection; false with c.err set on failure.  With
    // n_expert > 0 the tensor is a mixture-of-experts weight [k, m, n_expert], asked for mul_mat_id.
    bool place(Call & call, ggml_type type, int64_t k, int64_t m, ggml_backend_buffer_type_t buft, int64_t n_expert = 0) {
        t = n_expert > 0 ? ggml_new_tensor_3d(c.ctx, type, k, m, n_expert) : ggml_new_tensor_2d(c.ctx, type, k, m);
        buffer = ggml_backend_alloc_ctx_tensors_from_buft(c.ctx, buft);
        if (!buffer) {
            call.bad("%s: allocating a %s tensor in %s failed", call.name.c_str(), ggml_type_name(type), ggml_backend_buft_name(buft));
            return false;
        }
        Ctx probe(4);
        ggml_tensor * x = ggml_new_tensor_3d(probe.ctx, GGML_TYPE_F32, k, 1, 1);
        ggml_tensor * op = n_expert > 0 ? ggml_mul_mat_id(probe.ctx, t, x, ggml_new_tensor_2d(probe.ctx, GGML_TYPE_I32, 1, 1))
                                        : ggml_mul_mat(probe.ctx, t, x);
        supported = ggml_backend_dev_supports_op(ggml_backend_buft_get_device(buft), op);
        const size_t align = ggml_backend_buft_get_alignment(buft);
        call.note("buft", ggml_backend_buft_name(buft));
        call.note("traits", traits_name(t));
        call.note(n_expert > 0 ? "supports_mul_mat_id" : "supports_mul_mat", supported ? "1" : "0");
        call.note("alignment", std::to_string(align));
        call.note("alloc_size", std::to_string(ggml_backend_buft_get_alloc_size(buft, t)));
        call.note("nbytes", std::to_string(ggml_nbytes(t)));
        call.note("misalignment", std::to_string(reinterpret_cast<uintptr_t>(t->data) % align));
        traits = t->extra != nullptr;
        return true;
    }
};

// No parameters, no buffers.  Notes what this build has:
//   type.<name>=<ggml type id> for every type of the tree
//   layout.<name>=<ggml type>,<INTER_SIZE>,<NB_COLS>,<sizeof interleaved block>
//   quantize_mat.<type>_4x<inter>=1 ; buft=<name of the CPU_REPACK buffer type or none>
uint32_t k_repack_info(Call & c) {
    if (!c.shape(0, 0, 0)) return ST_BAD_REQUEST;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const ggml_type_traits * tt = ggml_get_type_traits((ggml_type)t);
        if (tt->blck_size == 0 || tt->type_name == nullptr) continue;  // a removed type
        c.note((std::string("type.") + tt->type_name).c_str(), std::to_string(t));
    }
    for (const Layout & l : LAYOUTS) {
        c.note((std::string("layout.") + l.name).c_str(),
               std::to_string((int)l.type) + "," + std::to_string(l.inter) + "," + std::to_string(l.cols) + "," +
                   std::to_string(l.xbytes));
    }
    for (const QuantizeMat & q : QUANTIZE_MATS) {
        c.note((std::string("quantize_mat.") + ggml_type_name(q.type) + "_4x" + std::to_string(q.inter)).c_str(), "1");
    }
    ggml_backend_buffer_type_t buft = repack_buft();
    c.note("buft", buft ? ggml_backend_buft_name(buft) : "none");
    return ST_OK;
}

// ip = {type, inter, cols, m, k}; bufs = {W: m rows of k elements of `type` in, out: ggml_row_size * m}.
// ggml's repack code for this layout, called directly (no selection); notes its return code.
uint32_t k_repack_layout(Call & c) {
    if (!c.shape(5, 0, 2)) return ST_BAD_REQUEST;
    const int64_t type = c.ip[0], m = c.ip[3], k = c.ip[4];
    const Layout * l = find_layout(c, type, c.ip[1], c.ip[2]);
    if (!l) return ST_BAD_REQUEST;
    if (m < 1 || k < 1 || k % ggml_blck_size(l->type) != 0) return c.bad("repack_layout: bad shape m=%lld k=%lld", (long long)m, (long long)k);
    const size_t bytes = ggml_row_size(l->type, k) * m;
    if (!c.size_is(0, bytes) || !c.size_is(1, bytes)) return ST_BAD_REQUEST;
    Ctx ctx(1);
    ggml_tensor * t = ggml_new_tensor_2d(ctx.ctx, l->type, k, m);
    t->data = c.buf<void>(1);
    c.note("rc", std::to_string(l->repack(t, c.buf<const void>(0), bytes)));
    return ST_OK;
}

// ip = {type, m, k}; bufs = {W: m rows of k elements in, out: ggml_row_size * m}.
// Allocates the tensor in CPU_REPACK (ggml's selection runs), notes the outcome; if traits were
// chosen, ggml_backend_tensor_set repacks W and the bytes ggml wrote (tensor->data) go to out.
uint32_t k_repack_buffer(Call & c) {
    if (!c.shape(3, 0, 2)) return ST_BAD_REQUEST;
    const int64_t type = c.ip[0], m = c.ip[1], k = c.ip[2];
    if (!valid_type(type) || m < 1 || k < 1 || k % ggml_blck_size((ggml_type)type) != 0) {
        return c.bad("repack_buffer: bad type %lld or shape m=%lld k=%lld", (long long)type, (long long)m, (long long)k);
    }
    const size_t bytes = ggml_row_size((ggml_type)type, k) * m;
    if (!c.size_is(0, bytes) || !c.size_is(1, bytes)) return ST_BAD_REQUEST;
    ggml_backend_buffer_type_t buft = repack_buft();
    if (!buft) return c.bad("repack_buffer: the CPU device lists no CPU_REPACK buffer type");
    Weights w;
    if (!w.place(c, (ggml_type)type, k, m, buft)) return ST_BAD_REQUEST;
    if (w.traits) {
        ggml_backend_tensor_set(w.t, c.buf<const void>(0), 0, bytes);
        memcpy(c.buf<void>(1), w.t->data, bytes);
    }
    c.note("repacked", w.traits ? "1" : "0");
    return ST_OK;
}

// ip = {type, inter, cols, impl, kind, n, nr, nc}: impl 0 is the entry point (RVV where the tree
// has it), 1 its *_generic twin; kind 0 is GEMV (called once per activation row with nr = 1, as
// forward_mul_mat_one_chunk does), 1 GEMM (one call, nr % 4 == 0).
// bufs = {vx: nc / cols * (n / block) interleaved blocks in,
//         vy: GEMV nr rows of the activation type / GEMM nr / 4 groups of 4-row blocks in,
//         s: nr x nc floats out (row stride nc)}.
uint32_t k_repack_gemx(Call & c) {
    if (!c.shape(8, 0, 3)) return ST_BAD_REQUEST;
    const Layout * l = find_layout(c, c.ip[0], c.ip[1], c.ip[2]);
    if (!l) return ST_BAD_REQUEST;
    const int64_t impl = c.ip[3], kind = c.ip[4], n = c.ip[5], nr = c.ip[6], nc = c.ip[7];
    const ggml_type vdt = ggml_get_type_traits_cpu(l->type)->vec_dot_type;
    if (impl < 0 || impl > 1 || kind < 0 || kind > 1) return c.bad("repack_gemx: impl=%lld kind=%lld", (long long)impl, (long long)kind);
    if (n < 1 || n % ggml_blck_size(l->type) != 0 || nr < 1 || nc < 1 || nc % l->cols != 0 || (kind == 1 && nr % 4 != 0)) {
        return c.bad("repack_gemx: bad shape n=%lld nr=%lld nc=%lld", (long long)n, (long long)nr, (long long)nc);
    }
    const size_t act_row = ggml_row_size(vdt, n);
    if (!c.size_is(0, ggml_row_size(l->type, n) * nc) || !c.size_is(1, act_row * nr) || !c.size_is(2, sizeof(float) * nr * nc)) {
        return ST_BAD_REQUEST;
    }
    GemFn fn = kind == 0 ? (impl == 0 ? l->gemv : l->gemv_generic) : (impl == 0 ? l->gemm : l->gemm_generic);
    float * s = c.buf<float>(2);
    const char * vy = c.buf<const char>(1);
    if (kind == 0) {
        for (int64_t r = 0; r < nr; ++r) fn((int)n, s + r * nc, (size_t)nc, c.buf<const void>(0), vy + r * act_row, 1, (int)nc);
    } else {
        fn((int)n, s, (size_t)nc, c.buf<const void>(0), vy, (int)nr, (int)nc);
    }
    return ST_OK;
}

// ip = {type (q8_0 / q8_K), inter, k}; bufs = {x: 4 rows of k floats in, y: 4 rows of `type` out,
// interleaved}.  ggml_quantize_mat_<type>_4x<inter>.
uint32_t k_repack_quantize_mat(Call & c) {
    if (!c.shape(3, 0, 2)) return ST_BAD_REQUEST;
    const int64_t type = c.ip[0], inter = c.ip[1], k = c.ip[2];
    QuantizeMatFn fn = nullptr;
    for (const QuantizeMat & q : QUANTIZE_MATS) {
        if (q.type == type && q.inter == inter) fn = q.fn;
    }
    if (!fn) return c.bad("repack_quantize_mat: no 4x%lld quantizer for ggml type %lld in this build", (long long)inter, (long long)type);
    if (k < 1 || k % ggml_blck_size((ggml_type)type) != 0) return c.bad("repack_quantize_mat: bad k=%lld", (long long)k);
    if (!c.size_is(0, sizeof(float) * 4 * k) || !c.size_is(1, 4 * ggml_row_size((ggml_type)type, k))) return ST_BAD_REQUEST;
    fn(c.buf<const float>(0), c.buf<void>(1), k);
    return ST_OK;
}

// One mul_mat / mul_mat_id request: the weights (buffer 0: m rows of k elements of `type`, per
// expert) placed as llama.cpp places them (placement 1 / 2: CPU_REPACK / SpacemiT's buffer type when the
// device supports the op there, else the CPU buffer; 0: the CPU buffer) and copied into guarded memory
// (all the bytes the buffer type allocates for them); `build` makes the op on the weight tensor (its other
// inputs and result bound to the request's buffers); the graph runs on n_threads, `reps` times over the
// same placed weights (the set-up once: a cost measurement of reps 1 and 2 differs by one compute), and the
// guards of the weights and the work buffer are checked.  With `work_out` (the request's last buffer) its
// size's first bytes of the work buffer are copied there: the activations as the op quantized them.
template <typename Build>
uint32_t run_weights_op(Call & c, ggml_type type, int64_t k, int64_t m, int64_t n_expert, int64_t placement,
                        int64_t n_threads, Build build, int64_t reps = 1, Buffer * work_out = nullptr) {
    const size_t wbytes = ggml_row_size(type, k) * m * (n_expert > 0 ? n_expert : 1);
    Weights w;
    if (placement >= 1) {
        ggml_backend_buffer_type_t buft = extra_buft(PLACEMENTS[placement]);
        if (!buft) return c.bad("%s: the CPU device lists no %s buffer type", c.name.c_str(), PLACEMENTS[placement]);
        if (!w.place(c, type, k, m, buft, n_expert)) return ST_BAD_REQUEST;
    }
    Ctx g(8);
    ggml_tensor * wt;
    const bool repacked = w.traits && w.supported;
    Buffer wmem;  // the weights' bytes between guards, repacked or not
    const size_t placed = repacked ? ggml_backend_buffer_get_alloc_size(w.buffer, w.t) : wbytes;
    if (!wmem.allocate(placed, GUARD_BYTE_IN)) return c.bad("%s: out of memory", c.name.c_str());
    if (repacked) {
        ggml_backend_tensor_set(w.t, c.buf<const void>(0), 0, wbytes);
        memcpy(wmem.data(), w.t->data, placed);
        wt = w.t;  // still in the extra buffer: the op dispatches through its traits
    } else {
        memcpy(wmem.data(), c.buf<const void>(0), wbytes);
        wt = n_expert > 0 ? ggml_new_tensor_3d(g.ctx, type, k, m, n_expert) : ggml_new_tensor_2d(g.ctx, type, k, m);
    }
    wt->data = wmem.data();
    c.note("weights", repacked ? PLACEMENTS[placement] : "CPU");

    ggml_tensor * y = build(g.ctx, wt);
    ggml_cgraph * gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gf, y);
    ggml_cplan plan = ggml_graph_plan(gf, (int)n_threads, threadpool_for((int)n_threads));
    Buffer work;
    if (plan.work_size > 0) {
        if (!work.allocate(plan.work_size, GUARD_BYTE_OUT)) return c.bad("%s: out of memory", c.name.c_str());
        plan.work_data = work.data();
    }
    if (work_out && work_out->size > plan.work_size) {
        return c.bad("%s: %zu bytes of the work buffer asked for, it has %zu", c.name.c_str(), work_out->size,
                     plan.work_size);
    }
    for (int64_t r = 0; r < reps; ++r) {
        const ggml_status st = ggml_graph_compute(gf, &plan);
        if (st != GGML_STATUS_SUCCESS) return c.bad("%s: ggml_graph_compute returned %d", c.name.c_str(), (int)st);
    }
    long where = 0;
    if (!wmem.guards_intact(where) || (plan.work_size > 0 && !work.guards_intact(where))) {
        c.err = c.name + " wrote outside the weights or the work buffer (offset " + std::to_string(where) + ")";
        return ST_GUARD;
    }
    c.note("work_size", std::to_string(plan.work_size));
    if (work_out && work_out->size > 0) memcpy(work_out->data(), work.data(), work_out->size);
    return ST_OK;
}

// The request's optional last buffer (bufs[n_bufs - 1] when there are n_bufs): the work buffer's head.
Buffer * work_head(Call & c, size_t n_bufs) { return c.bufs.size() == n_bufs ? &c.bufs[n_bufs - 1] : nullptr; }

// ip = {type, k, m, n, batch, placement, n_threads[, reps]}: placement as run_weights_op; reps (default 1):
// how many times the graph is computed after the one set-up (placement, repacking).
// bufs = {W: m rows of k elements of `type` in, X: batch x n x k floats in, Y: batch x n x m floats out
//         [, A: out, the first bytes of the work buffer: X as the op quantized it]}.
// Y = mul_mat(W, X): Y[b][j][i] = W[i] . X[b][j].
uint32_t k_repack_mul_mat(Call & c) {
    if (!c.shape_trailing(7, 0, c.bufs.size() == 4 ? 4 : 3)) return ST_BAD_REQUEST;
    const int64_t type = c.ip[0], k = c.ip[1], m = c.ip[2], n = c.ip[3], batch = c.ip[4], placement = c.ip[5];
    const int64_t n_threads = c.ip[6], reps = c.trailing(7, 1);
    if (!valid_type(type) || k < 1 || k % ggml_blck_size((ggml_type)type) != 0 || m < 1 || n < 1 || batch < 1 ||
        placement < 0 || placement > 2 || reps < 1) {
        return c.bad("repack_mul_mat: bad parameters");
    }
    if (const uint32_t st = check_threads(c, n_threads)) return st;
    if (!c.size_is(0, ggml_row_size((ggml_type)type, k) * m) || !c.size_is(1, sizeof(float) * batch * n * k) ||
        !c.size_is(2, sizeof(float) * batch * n * m)) {
        return ST_BAD_REQUEST;
    }
    return run_weights_op(c, (ggml_type)type, k, m, 0, placement, n_threads, [&](ggml_context * ctx, ggml_tensor * wt) {
        ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, k, n, batch);
        x->data = c.buf<void>(1);
        ggml_tensor * y = ggml_mul_mat(ctx, wt, x);
        y->data = c.buf<void>(2);
        return y;
    }, reps, work_head(c, 4));
}

// ip = {type, k, m, n_expert, n_used, x_rows, n_tokens, placement, n_threads}: a mixture-of-experts
// layer, as llama.cpp's ffn_*_exps: x_rows is 1 (one activation row per token, shared by its
// experts: up / gate) or n_used (one row per used expert: down).
// bufs = {W: n_expert x m rows of k elements of `type` in, X: n_tokens x x_rows x k floats in,
//         ids: n_tokens x n_used int32 in (the experts of each token), Y: n_tokens x n_used x m floats out
//         [, A: out, the work buffer's head as repack_mul_mat's]}.
// Y = mul_mat_id(W, X, ids): Y[t][u] = W[ids[t][u]] . X[t][u % x_rows].
uint32_t k_repack_mul_mat_id(Call & c) {
    if (!c.shape(9, 0, c.bufs.size() == 5 ? 5 : 4)) return ST_BAD_REQUEST;
    const int64_t type = c.ip[0], k = c.ip[1], m = c.ip[2], n_expert = c.ip[3], n_used = c.ip[4], x_rows = c.ip[5];
    const int64_t n_tokens = c.ip[6], placement = c.ip[7], n_threads = c.ip[8];
    if (!valid_type(type) || k < 1 || k % ggml_blck_size((ggml_type)type) != 0 || m < 1 || n_expert < 1 ||
        n_used < 1 || n_used > n_expert || (x_rows != 1 && x_rows != n_used) || n_tokens < 1 || placement < 0 ||
        placement > 2) {
        return c.bad("repack_mul_mat_id: bad parameters");
    }
    if (const uint32_t st = check_threads(c, n_threads)) return st;
    if (!c.size_is(0, ggml_row_size((ggml_type)type, k) * m * n_expert) ||
        !c.size_is(1, sizeof(float) * n_tokens * x_rows * k) || !c.size_is(2, sizeof(int32_t) * n_tokens * n_used) ||
        !c.size_is(3, sizeof(float) * n_tokens * n_used * m)) {
        return ST_BAD_REQUEST;
    }
    const int32_t * ids_in = c.buf<const int32_t>(2);
    for (int64_t i = 0; i < n_tokens * n_used; ++i) {
        if (ids_in[i] < 0 || ids_in[i] >= n_expert) return c.bad("repack_mul_mat_id: expert id %d out of range", ids_in[i]);
    }
    return run_weights_op(c, (ggml_type)type, k, m, n_expert, placement, n_threads,
                          [&](ggml_context * ctx, ggml_tensor * wt) {
        ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, k, x_rows, n_tokens);
        x->data = c.buf<void>(1);
        ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n_used, n_tokens);
        ids->data = c.buf<void>(2);
        ggml_tensor * y = ggml_mul_mat_id(ctx, wt, x, ids);
        y->data = c.buf<void>(3);
        return y;
    }, 1, work_head(c, 5));
}

RVVDIFF_KERNEL("repack_info", k_repack_info);
RVVDIFF_KERNEL("repack_layout", k_repack_layout);
RVVDIFF_KERNEL("repack_buffer", k_repack_buffer);
RVVDIFF_KERNEL("repack_gemx", k_repack_gemx);
RVVDIFF_KERNEL("repack_quantize_mat", k_repack_quantize_mat);
RVVDIFF_KERNEL("repack_mul_mat", k_repack_mul_mat);
RVVDIFF_KERNEL("repack_mul_mat_id", k_repack_mul_mat_id);

}  // namespace
