// Kernel family: quantized dot products and quantizers (ggml-cpu/arch/riscv/quants.c, quants.c,
// ggml-quants.c).  Python side: cases/test_quant_dot.py, cases/test_quantize.py; the oracles
// are oracles/quants.py.
//
// Types travel as ggml's own enum values; "quant_types" lists the tree's types so that the
// Python side never hard-codes an id (a tree with a new type says so).  The RVV entry points
// are reached the way mul_mat reaches them, through ggml_get_type_traits_cpu(); their scalar
// twins (*_generic, declared in quants.h) are reached directly, for triangulation.

#include "server.h"

#include "ggml-cpu.h"
#include "ggml.h"
#include "ggml-quants.h"
#include "quants.h"

// On riscv a few generics are the entry points themselves (no RVV kernel exists for the
// type); arch-fallback.h says which, exactly as it does for ggml-cpu's own sources.
#include "arch-fallback.h"

#include "rvvdiff_tree.h"

#include <string>

namespace {

using namespace rvvdiff;

using VecDot = void (*)(int, float *, size_t, const void *, size_t, const void *, size_t, int);
using FromFloat = void (*)(const float *, void *, int64_t);

// The scalar twin of each type's vec_dot (the ones quants.h declares).
struct Generic {
    ggml_type type;
    VecDot fn;
};

// Generated from the tree (harness/bindings.py): every *_generic twin quants.h declares whose
// type the tree's enum has.
#define RVVDIFF_ENTRY(type, fn) {type, fn},
const Generic GENERIC_DOTS[] = {RVVDIFF_GENERIC_DOTS(RVVDIFF_ENTRY)};

// The scalar twins of the activation quantizers.
struct GenericQuantizer {
    ggml_type type;
    FromFloat fn;
};

const GenericQuantizer GENERIC_QUANTIZERS[] = {RVVDIFF_GENERIC_QUANTIZERS(RVVDIFF_ENTRY)};
#undef RVVDIFF_ENTRY

bool valid_type(int64_t t) { return t >= 0 && t < GGML_TYPE_COUNT && ggml_get_type_traits((ggml_type)t)->blck_size > 0; }

size_t row_bytes(ggml_type t, int64_t n) { return ggml_row_size(t, n); }

// No parameters, no buffers.  Notes one line per type of this tree:
//   type.<name>=<id>,<blck_size>,<type_size>,<is_quantized>,<has vec_dot>,<vec_dot_type>,<has from_float>,<nrows>,<has generic>
uint32_t k_quant_types(Call & c) {
    if (!c.shape(0, 0, 0)) return ST_BAD_REQUEST;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const ggml_type_traits * tt = ggml_get_type_traits((ggml_type)t);
        if (tt->blck_size == 0 || tt->type_name == nullptr) continue;  // a removed type
        const ggml_type_traits_cpu * cpu = ggml_get_type_traits_cpu((ggml_type)t);
        bool generic = false;
        for (const Generic & g : GENERIC_DOTS) generic |= g.type == t;
        char v[160];
        snprintf(v, sizeof v, "%d,%lld,%zu,%d,%d,%d,%d,%lld,%d", t, (long long)tt->blck_size, tt->type_size,
                 tt->is_quantized ? 1 : 0, cpu->vec_dot ? 1 : 0, (int)cpu->vec_dot_type, cpu->from_float ? 1 : 0,
                 (long long)cpu->nrows, generic ? 1 : 0);
        c.note((std::string("type.") + tt->type_name).c_str(), v);
    }
    return ST_OK;
}

// ip = {type, n, impl}: impl 0 is the CPU type traits' vec_dot (the RVV entry point, as
// mul_mat calls it), 1 the scalar *_generic twin.
// bufs = {x: row of n elements of `type` in, y: row of n elements of its vec_dot_type in, s: float out}.
uint32_t k_quant_vec_dot(Call & c) {
    if (!c.shape(3, 0, 3)) return ST_BAD_REQUEST;
    const int64_t t = c.ip[0], n = c.ip[1], impl = c.ip[2];
    if (!valid_type(t)) return c.bad("quant_vec_dot: unknown ggml type %lld", (long long)t);
    const ggml_type type = (ggml_type)t;
    const ggml_type_traits_cpu * cpu = ggml_get_type_traits_cpu(type);
    if (cpu->vec_dot == nullptr) return c.bad("quant_vec_dot: type %s has no vec_dot", ggml_type_name(type));
    const ggml_type vdt = cpu->vec_dot_type;
    if (n <= 0 || n % ggml_blck_size(type) != 0 || n % ggml_blck_size(vdt) != 0) {
        return c.bad("quant_vec_dot: n=%lld is not a positive multiple of the block sizes of %s and %s", (long long)n,
                     ggml_type_name(type), ggml_type_name(vdt));
    }
    if (!c.size_is(0, row_bytes(type, n)) || !c.size_is(1, row_bytes(vdt, n)) || !c.size_is(2, sizeof(float))) {
        return ST_BAD_REQUEST;
    }
    VecDot fn = nullptr;
    if (impl == 0) {
        fn = cpu->vec_dot;
    } else if (impl == 1) {
        for (const Generic & g : GENERIC_DOTS) {
            if (g.type == type) fn = g.fn;
        }
        if (fn == nullptr) return c.bad("quant_vec_dot: no *_generic twin known for %s", ggml_type_name(type));
    } else {
        return c.bad("quant_vec_dot: impl=%lld (0: type traits, 1: generic)", (long long)impl);
    }
    fn(static_cast<int>(n), c.buf<float>(2), 0, c.buf<const void>(0), 0, c.buf<const void>(1), 0, 1);
    return ST_OK;
}

// ip = {type, k, impl}: impl 0 is the CPU type traits' from_float (the RVV activation
// quantizers for q8_0 / q8_1 / q8_K), 1 their scalar *_generic twin, 2 ggml-base's reference
// quantizer (from_float_ref, quantize_row_<t>_ref).
// bufs = {x: k floats in, y: row of k elements of `type` out}.
uint32_t k_quant_from_float(Call & c) {
    if (!c.shape(3, 0, 2)) return ST_BAD_REQUEST;
    const int64_t t = c.ip[0], k = c.ip[1], impl = c.ip[2];
    if (!valid_type(t)) return c.bad("quant_from_float: unknown ggml type %lld", (long long)t);
    const ggml_type type = (ggml_type)t;
    if (k <= 0 || k % ggml_blck_size(type) != 0) {
        return c.bad("quant_from_float: k=%lld is not a positive multiple of %s's block size", (long long)k,
                     ggml_type_name(type));
    }
    if (!c.size_is(0, k * sizeof(float)) || !c.size_is(1, row_bytes(type, k))) return ST_BAD_REQUEST;
    FromFloat fn = nullptr;
    if (impl == 0) {
        fn = ggml_get_type_traits_cpu(type)->from_float;
    } else if (impl == 1) {
        for (const GenericQuantizer & g : GENERIC_QUANTIZERS) {
            if (g.type == type) fn = g.fn;
        }
    } else if (impl == 2) {
        fn = ggml_get_type_traits(type)->from_float_ref;
    } else {
        return c.bad("quant_from_float: impl=%lld (0: cpu traits, 1: generic, 2: reference)", (long long)impl);
    }
    if (fn == nullptr) return c.bad("quant_from_float: %s has no quantizer of kind %lld", ggml_type_name(type), (long long)impl);
    fn(c.buf<const float>(0), c.buf<void>(1), k);
    return ST_OK;
}

// ip = {type, nrows, n_per_row}; bufs = {x: nrows * n_per_row floats in, imatrix: n_per_row
// floats in (size 0: none), y: nrows rows of `type` out}.  ggml_quantize_chunk: how model
// weights are made, including the IQ types' grid searches (which need ggml_quantize_init).
uint32_t k_quantize_chunk(Call & c) {
    if (!c.shape(3, 0, 3)) return ST_BAD_REQUEST;
    const int64_t t = c.ip[0], nrows = c.ip[1], npr = c.ip[2];
    if (!valid_type(t)) return c.bad("quantize_chunk: unknown ggml type %lld", (long long)t);
    const ggml_type type = (ggml_type)t;
    if (nrows <= 0 || npr <= 0 || npr % ggml_blck_size(type) != 0) {
        return c.bad("quantize_chunk: nrows=%lld, n_per_row=%lld do not fit %s", (long long)nrows, (long long)npr,
                     ggml_type_name(type));
    }
    const bool has_imatrix = c.bufs[1].size != 0;
    if (!c.size_is(0, nrows * npr * sizeof(float)) || (has_imatrix && !c.size_is(1, npr * sizeof(float))) ||
        !c.size_is(2, nrows * row_bytes(type, npr))) {
        return ST_BAD_REQUEST;
    }
    if (!has_imatrix && ggml_quantize_requires_imatrix(type)) {
        return c.bad("quantize_chunk: %s requires an importance matrix", ggml_type_name(type));
    }
    ggml_quantize_chunk(type, c.buf<const float>(0), c.buf<void>(2), 0, nrows, npr,
                        has_imatrix ? c.buf<const float>(1) : nullptr);
    return ST_OK;
}

RVVDIFF_KERNEL("quant_types", k_quant_types);
RVVDIFF_KERNEL("quant_vec_dot", k_quant_vec_dot);
RVVDIFF_KERNEL("quant_from_float", k_quant_from_float);
RVVDIFF_KERNEL("quantize_chunk", k_quantize_chunk);

}  // namespace
