// rvvdiff kernel server: what a kernel adapter sees.
//
// The server core (server.cpp) reads a request, places every buffer between
// guard regions, calls the adapter registered under the request's kernel
// name, checks the guards and answers.  Adapters live in one file per kernel
// family (k_*.cpp) and register themselves with RVVDIFF_KERNEL; the Python
// definition of the family (cases/test_*.py) is the one place that says what
// each parameter and buffer means.  Adapters never compute expected values.

#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string>
#include <vector>

struct ggml_threadpool;

namespace rvvdiff {

enum Status : uint32_t {
    ST_OK = 0,
    ST_GUARD = 1,           // a kernel wrote outside one of its buffers
    ST_BAD_REQUEST = 2,     // wrong parameter / buffer counts or sizes
    ST_UNKNOWN_KERNEL = 3,  // no adapter of that name in this server
    ST_UNSUPPORTED = 4,     // valid, but this emulator cannot run it (threads on Spike's one hart)
};

enum BufKind : uint32_t { BUF_IN = 0, BUF_OUT = 1, BUF_INOUT = 2 };

// Guard size: larger than the widest register group a kernel can store
// (VLEN 1024 x LMUL 8 = 1024 bytes), so a whole-group overrun stays inside.
constexpr size_t GUARD = 4096;
constexpr unsigned char GUARD_BYTE_IN = 0xFF;   // NaN in every float format: an over-read poisons the result
constexpr unsigned char GUARD_BYTE_OUT = 0xA5;  // checked after every call

struct Buffer {
    uint32_t kind = BUF_IN;
    unsigned char fill = 0;
    unsigned char guard_byte = 0;
    size_t size = 0;
    unsigned char * base = nullptr;  // GUARD | data (size bytes) | GUARD

    Buffer() = default;
    Buffer(const Buffer &) = delete;
    Buffer & operator=(const Buffer &) = delete;
    Buffer(Buffer && o) noexcept { *this = static_cast<Buffer &&>(o); }
    Buffer & operator=(Buffer && o) noexcept;
    ~Buffer();

    unsigned char * data() const { return base + GUARD; }
    bool allocate(size_t n, unsigned char guard);
    // False when a guard byte was overwritten; `where` is its offset from the
    // start of the data (negative: before it).
    bool guards_intact(long & where) const;
};

struct Call {
    std::string name;
    std::vector<int64_t> ip;  // integer parameters
    std::vector<double> fp;   // float parameters
    std::vector<Buffer> bufs;
    std::string err;   // message for a non-OK status
    std::string info;  // "key=value" facts about what ran, returned with the result

    template <typename T> T * buf(size_t i) { return reinterpret_cast<T *>(bufs[i].data()); }

    // Checks parameter and buffer counts; on mismatch fills err and returns false.
    bool shape(size_t n_ip, size_t n_fp, size_t n_bufs);
    // shape() for a request of n_ip fixed integer parameters and one optional after them (read by trailing()).
    bool shape_trailing(size_t n_ip, size_t n_fp, size_t n_bufs) {
        return shape(ip.size() == n_ip + 1 ? n_ip + 1 : n_ip, n_fp, n_bufs);
    }
    // The optional last integer parameter after n fixed ones (a graph request's reps): its value, or dflt when the
    // request has only the n.
    int64_t trailing(size_t n, int64_t dflt) const { return ip.size() == n + 1 ? ip[n] : dflt; }
    // Checks one buffer's size in bytes; on mismatch fills err and returns false.
    bool size_is(size_t i, size_t bytes);
    // Sets err from a printf-style message and returns ST_BAD_REQUEST.
    uint32_t bad(const char * fmt, ...) __attribute__((format(printf, 2, 3)));
    // Appends "key=value\n" to info.
    void note(const char * key, const std::string & value);
};

using KernelFn = uint32_t (*)(Call &);

struct Kernel {
    const char * name;
    KernelFn fn;
};

std::vector<Kernel> & registry();

// The most threads a graph request may ask for: 64, the core count of the largest RISC-V
// servers (SG2042).  The drawn cases use 1..4; fixed cases need more (a split-KV flash
// attention with more threads than KV chunks leaves some threads without positions).
constexpr int MAX_THREADS = 64;

// One persistent ggml thread pool per thread count (1..MAX_THREADS), as llama.cpp keeps one:
// creating threads for every graph costs more under QEMU than a small graph does.
// poll = 0: idle workers sleep instead of spinning between requests.
::ggml_threadpool * threadpool_for(int n_threads);

// Checks a request's thread count: ST_OK for 1..MAX_THREADS threads where the server
// can start them; ST_UNSUPPORTED for more than one thread on Spike (the
// bare-metal runtime, harness/server/spike/rt.c, has one hart and no clone);
// ST_BAD_REQUEST otherwise.  Fills err when not OK.
uint32_t check_threads(Call & c, int64_t n_threads);

struct Registrar {
    Registrar(const char * name, KernelFn fn) { registry().push_back({name, fn}); }
};

}  // namespace rvvdiff

#define RVVDIFF_CAT2(a, b) a##b
#define RVVDIFF_CAT(a, b) RVVDIFF_CAT2(a, b)
// Registers `fn` under `name` (a string): RVVDIFF_KERNEL("vec_dot_f16", k_vec_dot_f16);
#define RVVDIFF_KERNEL(name, fn) static ::rvvdiff::Registrar RVVDIFF_CAT(rvvdiff_reg_, __LINE__)(name, fn)
