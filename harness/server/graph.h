// rvvdiff kernel server: one small ggml graph whose inputs and output are the call's guarded buffers.
//
// Shared by the adapters that compute ggml graphs (k_graph.cpp: mul_mat, attention; k_ops.cpp: single ops).
// Tensors bound to a call buffer use it directly (an over-read meets the NaN guard bytes, an over-write is
// reported by the server core); every other tensor and the work buffer get guarded scratch memory, checked
// after the graph ran.

#pragma once

#include "server.h"

#include "ggml-cpu.h"
#include "ggml.h"

#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

namespace rvvdiff {

// One graph: a no-alloc context whose tensors point either into the call's buffers or
// into guarded scratch memory owned here.
class Graph {
  public:
    explicit Graph(size_t max_tensors) {
        ggml_init_params p = {ggml_tensor_overhead() * max_tensors + ggml_graph_overhead(), nullptr, true};
        ctx_ = ggml_init(p);
    }
    ~Graph() { ggml_free(ctx_); }
    Graph(const Graph &) = delete;
    Graph & operator=(const Graph &) = delete;

    ggml_context * ctx() const { return ctx_; }

    // Makes `t` use buffer i of the call; false (with c.err set) if its size is not ggml_nbytes(t).
    bool bind(Call & c, ggml_tensor * t, size_t i) {
        if (!c.size_is(i, ggml_nbytes(t))) return false;
        t->data = c.bufs[i].data();
        return true;
    }

    // Gives every tensor still without memory a guarded scratch allocation, computes the
    // graph ending in `out` on n_threads (1..MAX_THREADS) threads `reps` times (the set-up
    // once), and checks the scratch guards.
    uint32_t compute(Call & c, ggml_tensor * out, int n_threads, int64_t reps = 1) {
        ggml_cgraph * gf = ggml_new_graph(ctx_);
        ggml_build_forward_expand(gf, out);
        for (ggml_tensor * t = ggml_get_first_tensor(ctx_); t; t = ggml_get_next_tensor(ctx_, t)) {
            if (t->data || t->view_src) continue;
            t->data = scratch(ggml_nbytes(t), ggml_op_desc(t));
            if (!t->data) return c.bad("%s: out of memory", c.name.c_str());
        }
        for (ggml_tensor * t = ggml_get_first_tensor(ctx_); t; t = ggml_get_next_tensor(ctx_, t)) {
            if (t->view_src) t->data = static_cast<char *>(t->view_src->data) + t->view_offs;
        }
        ggml_cplan plan = ggml_graph_plan(gf, n_threads, threadpool_for(n_threads));
        if (plan.work_size > 0) {
            plan.work_data = static_cast<uint8_t *>(scratch(plan.work_size, "the work buffer (ggml_graph_plan's work_size)"));
            if (!plan.work_data) return c.bad("%s: out of memory", c.name.c_str());
        }
        for (int64_t r = 0; r < reps; ++r) {
            const ggml_status st = ggml_graph_compute(gf, &plan);
            if (st != GGML_STATUS_SUCCESS) return c.bad("%s: ggml_graph_compute returned %d", c.name.c_str(), (int) st);
        }
        return guards(c);
    }

    // Guarded scratch memory of n bytes (filled with GUARD_BYTE_OUT) that guards() checks, named `what` in its
    // message; null when out of memory.
    void * scratch(size_t n, const char * what) {
        mem_.emplace_back();
        if (!mem_.back().allocate(n, GUARD_BYTE_OUT)) {
            mem_.pop_back();
            return nullptr;
        }
        memset(mem_.back().data(), GUARD_BYTE_OUT, n);  // 0xA5: an ordinary number in every float format
        names_.push_back(what);
        return mem_.back().data();
    }

    // ST_OK, or ST_GUARD (with c.err) when the kernels wrote outside some scratch memory.
    uint32_t guards(Call & c) const {
        for (size_t i = 0; i < mem_.size(); ++i) {
            long where = 0;
            if (!mem_[i].guards_intact(where)) {
                char m[300];
                snprintf(m, sizeof m, "%s wrote outside %s (%zu bytes): first clobbered guard byte at offset %ld",
                         c.name.c_str(), names_[i], mem_[i].size, where);
                c.err = m;
                return ST_GUARD;
            }
        }
        return ST_OK;
    }

  private:
    ggml_context * ctx_ = nullptr;
    std::vector<Buffer> mem_;
    std::vector<const char *> names_;
};


}  // namespace rvvdiff
