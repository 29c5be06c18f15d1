// rvvdiff kernel server: the registry and the Buffer / Call helpers adapters
// use (server.h).  Shared by the server (server.cpp) and by standalone C
// reproducers, which call an adapter directly instead of reading requests.

#include "server.h"

#include "ggml-cpu.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

namespace rvvdiff {

std::vector<Kernel> & registry() {
    static std::vector<Kernel> kernels;
    return kernels;
}

Buffer & Buffer::operator=(Buffer && o) noexcept {
    if (this != &o) {
        free(base);
        kind = o.kind; fill = o.fill; guard_byte = o.guard_byte; size = o.size; base = o.base;
        o.base = nullptr;
    }
    return *this;
}

Buffer::~Buffer() { free(base); }

bool Buffer::allocate(size_t n, unsigned char guard) {
    size = n;
    guard_byte = guard;
    if (posix_memalign(reinterpret_cast<void **>(&base), 64, GUARD + n + GUARD) != 0) return false;
    memset(base, guard, GUARD);
    memset(base + GUARD + n, guard, GUARD);
    return true;
}

bool Buffer::guards_intact(long & where) const {
    for (size_t i = 0; i < GUARD; ++i) {
        if (base[GUARD - 1 - i] != guard_byte) { where = -static_cast<long>(i) - 1; return false; }
    }
    for (size_t i = 0; i < GUARD; ++i) {
        if (base[GUARD + size + i] != guard_byte) { where = static_cast<long>(size + i); return false; }
    }
    return true;
}

bool Call::shape(size_t n_ip, size_t n_fp, size_t n_bufs) {
    if (ip.size() == n_ip && fp.size() == n_fp && bufs.size() == n_bufs) return true;
    bad("%s expects %zu int params, %zu float params, %zu buffers; got %zu, %zu, %zu", name.c_str(), n_ip, n_fp,
        n_bufs, ip.size(), fp.size(), bufs.size());
    return false;
}

bool Call::size_is(size_t i, size_t bytes) {
    if (i < bufs.size() && bufs[i].size == bytes) return true;
    bad("%s: buffer %zu has %zu bytes, expected %zu", name.c_str(), i, i < bufs.size() ? bufs[i].size : 0, bytes);
    return false;
}

uint32_t Call::bad(const char * fmt, ...) {
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    err = m;
    return ST_BAD_REQUEST;
}

void Call::note(const char * key, const std::string & value) {
    info += key;
    info += "=";
    info += value;
    info += "\n";
}

// Defined (as 1) only by the Spike runtime: the number of harts it can run threads on.
extern "C" const int rvvdiff_spike_harts __attribute__((weak));

uint32_t check_threads(Call & c, int64_t n_threads) {
    if (n_threads < 1 || n_threads > MAX_THREADS) {
        return c.bad("%s: n_threads=%lld, expected 1..%d", c.name.c_str(), (long long)n_threads, MAX_THREADS);
    }
    if (&rvvdiff_spike_harts != nullptr && n_threads > rvvdiff_spike_harts) {
        c.err = c.name + ": " + std::to_string(n_threads) +
                " threads requested; Spike runs one hart without an OS, so only single-threaded requests run on it";
        return ST_UNSUPPORTED;
    }
    return ST_OK;
}

ggml_threadpool * threadpool_for(int n_threads) {
    static ggml_threadpool * pools[MAX_THREADS + 1] = {};
    if (n_threads < 1 || n_threads > MAX_THREADS) return nullptr;
    if (!pools[n_threads]) {
        ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
        p.poll = 0;
        pools[n_threads] = ggml_threadpool_new(&p);
    }
    return pools[n_threads];
}

}  // namespace rvvdiff
