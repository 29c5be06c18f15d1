// rvvdiff kernel server.
//
// A long-lived process, run under qemu-riscv64 at one VLEN, linked statically
// against one ISA build of ggml.  It answers framed binary requests on stdin
// and writes framed responses to stdout (the frame layout is documented in
// harness/protocol.py, which is the other end of the pipe).  Every buffer the
// harness sends is placed between guard regions filled with a known byte; a
// kernel that writes outside its buffers is reported as a guard violation
// naming the kernel and the buffer.
//
// Kernels are listed in one table (KERNELS below).  Each entry adapts one ggml
// entry point to the request: it checks the parameter and buffer counts and
// sizes, then calls ggml.  Nothing here computes an expected value; oracles
// live in Python.

#include "vec.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <time.h>
#include <unistd.h>
#include <vector>

#if defined(__riscv_v_intrinsic)
#include <riscv_vector.h>
#endif

namespace {

constexpr uint32_t REQUEST_MAGIC = 0x51445652;   // "RVDQ"
constexpr uint32_t RESPONSE_MAGIC = 0x52445652;  // "RVDR"
constexpr uint16_t PROTOCOL_VERSION = 1;

enum Op : uint16_t { OP_HELLO = 0, OP_CALL = 1, OP_QUIT = 2 };

enum Status : uint32_t {
    ST_OK = 0,
    ST_GUARD = 1,           // a kernel wrote outside one of its buffers
    ST_BAD_REQUEST = 2,     // malformed frame or wrong buffer sizes
    ST_UNKNOWN_KERNEL = 3,  // the kernel is not in this server's table
    ST_UNSUPPORTED = 4,     // the kernel exists but not in this ISA build
};

enum BufKind : uint32_t { BUF_IN = 0, BUF_OUT = 1, BUF_INOUT = 2 };

// Guard size: larger than the widest register group a kernel can store
// (VLEN 1024 x LMUL 8 = 1024 bytes), so a whole-group overrun stays inside.
constexpr size_t GUARD = 4096;
constexpr unsigned char GUARD_BYTE_OUT = 0xA5;

int out_fd = 1;

// ---------------------------------------------------------------- I/O ----

bool read_exact(void * dst, size_t n) {
    char * p = static_cast<char *>(dst);
    while (n > 0) {
        ssize_t r = read(0, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

void write_exact(const void * src, size_t n) {
    const char * p = static_cast<const char *>(src);
    while (n > 0) {
        ssize_t r = write(out_fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) _exit(3);
        p += r;
        n -= static_cast<size_t>(r);
    }
}

template <typename T> bool read_val(T & v) { return read_exact(&v, sizeof v); }
template <typename T> void put(std::string & s, T v) { s.append(reinterpret_cast<const char *>(&v), sizeof v); }

// ------------------------------------------------------------- buffers ----

struct Buffer {
    uint32_t kind = BUF_IN;
    unsigned char fill = 0;
    unsigned char guard_byte = 0;
    size_t size = 0;
    unsigned char * base = nullptr;  // GUARD | data (size) | GUARD

    unsigned char * data() const { return base + GUARD; }

    bool allocate(size_t n, unsigned char guard) {
        size = n;
        guard_byte = guard;
        size_t total = GUARD + n + GUARD;
        if (posix_memalign(reinterpret_cast<void **>(&base), 64, total) != 0) return false;
        memset(base, guard, GUARD);
        memset(base + GUARD + n, guard, GUARD);
        return true;
    }

    // Returns the offset (negative: before, >= size: after) of the first
    // clobbered guard byte, or 0 with ok=true when both guards are intact.
    bool guards_intact(long & where) const {
        for (size_t i = 0; i < GUARD; ++i) {
            if (base[GUARD - 1 - i] != guard_byte) { where = -static_cast<long>(i) - 1; return false; }
        }
        for (size_t i = 0; i < GUARD; ++i) {
            if (base[GUARD + size + i] != guard_byte) { where = static_cast<long>(size + i); return false; }
        }
        return true;
    }

    ~Buffer() { free(base); }
};

struct Call {
    std::string name;
    std::vector<int64_t> ip;
    std::vector<double> fp;
    std::vector<Buffer> bufs;
    std::string err;   // message for a non-OK status
    std::string info;  // free-form "key=value" facts about what ran

    template <typename T> T * buf(size_t i) { return reinterpret_cast<T *>(bufs[i].data()); }

    // Checks counts; fills err and returns false on mismatch.
    bool shape(size_t n_ip, size_t n_fp, size_t n_bufs) {
        if (ip.size() == n_ip && fp.size() == n_fp && bufs.size() == n_bufs) return true;
        char m[200];
        snprintf(m, sizeof m, "%s expects %zu int params, %zu float params, %zu buffers; got %zu, %zu, %zu",
                 name.c_str(), n_ip, n_fp, n_bufs, ip.size(), fp.size(), bufs.size());
        err = m;
        return false;
    }

    bool size_is(size_t i, size_t bytes) {
        if (bufs[i].size == bytes) return true;
        char m[200];
        snprintf(m, sizeof m, "%s: buffer %zu has %zu bytes, expected %zu", name.c_str(), i, bufs[i].size, bytes);
        err = m;
        return false;
    }
};

// ------------------------------------------------------------- kernels ----
//
// Each adapter returns a Status.  Parameter conventions are mirrored in the
// Python kernel definitions (cases/), which are the single place that says
// what each buffer holds.

template <typename In, typename Out, void (*F)(const In *, Out *, int64_t)>
uint32_t k_convert(Call & c) {
    if (!c.shape(1, 0, 2)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    if (!c.size_is(0, n * sizeof(In)) || !c.size_is(1, n * sizeof(Out))) return ST_BAD_REQUEST;
    F(c.buf<const In>(0), c.buf<Out>(1), n);
    return ST_OK;
}

// vec_dot kernels: ip = {n}; bufs = {x, y, s[1]}.
template <typename T, typename F>
uint32_t dot_adapter(Call & c, F f) {
    if (!c.shape(1, 0, 3)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    if (!c.size_is(0, n * sizeof(T)) || !c.size_is(1, n * sizeof(T)) || !c.size_is(2, sizeof(float))) {
        return ST_BAD_REQUEST;
    }
    f(static_cast<int>(n), c.buf<float>(2), 0, c.buf<T>(0), 0, c.buf<T>(1), 0, 1);
    return ST_OK;
}

uint32_t k_vec_dot_f32(Call & c) { return dot_adapter<float>(c, ggml_vec_dot_f32); }
uint32_t k_vec_dot_f16(Call & c) { return dot_adapter<ggml_fp16_t>(c, ggml_vec_dot_f16); }
uint32_t k_vec_dot_bf16(Call & c) { return dot_adapter<ggml_bf16_t>(c, ggml_vec_dot_bf16); }

// Self-test kernels: they misbehave on purpose so that the harness's own
// tests can show that crashes, hangs and out-of-bounds writes are reported.
uint32_t k_selftest_segv(Call &) {
    volatile int * p = nullptr;
    *p = 1;
    return ST_OK;
}

uint32_t k_selftest_sigill(Call &) {
    __asm__ volatile(".word 0x00000000");  // the all-zero word is defined as illegal
    return ST_OK;
}

uint32_t k_selftest_hang(Call &) {
    for (;;) pause();
    return ST_OK;
}

// Writes one byte just past the end (ip[0] = 1) or just before the start
// (ip[0] = -1) of buffer 0.
uint32_t k_selftest_oob(Call & c) {
    if (!c.shape(1, 0, 1)) return ST_BAD_REQUEST;
    unsigned char * d = c.buf<unsigned char>(0);
    if (c.ip[0] < 0) d[-1] ^= 0xFF; else d[c.bufs[0].size] ^= 0xFF;
    return ST_OK;
}

// Echo: copies buffer 0 into buffer 1 (protocol round-trip test).
uint32_t k_selftest_echo(Call & c) {
    if (!c.shape(0, 0, 2) || !c.size_is(1, c.bufs[0].size)) return ST_BAD_REQUEST;
    memcpy(c.bufs[1].data(), c.bufs[0].data(), c.bufs[0].size);
    return ST_OK;
}

struct Kernel {
    const char * name;
    uint32_t (*fn)(Call &);
};

const Kernel KERNELS[] = {
    {"fp16_to_fp32", k_convert<ggml_fp16_t, float, ggml_cpu_fp16_to_fp32>},
    {"fp32_to_fp16", k_convert<float, ggml_fp16_t, ggml_cpu_fp32_to_fp16>},
    {"bf16_to_fp32", k_convert<ggml_bf16_t, float, ggml_cpu_bf16_to_fp32>},
    {"fp32_to_bf16", k_convert<float, ggml_bf16_t, ggml_cpu_fp32_to_bf16>},
    {"vec_dot_f32", k_vec_dot_f32},
    {"vec_dot_f16", k_vec_dot_f16},
    {"vec_dot_bf16", k_vec_dot_bf16},
    {"selftest_segv", k_selftest_segv},
    {"selftest_sigill", k_selftest_sigill},
    {"selftest_hang", k_selftest_hang},
    {"selftest_oob", k_selftest_oob},
    {"selftest_echo", k_selftest_echo},
};

// ---------------------------------------------------------------- hello ----

// Facts the harness checks or reports: the VLEN ggml detected, and which
// extensions this build was compiled for (they decide which code paths exist).
std::string hello_text() {
    std::string s;
    char line[160];
    snprintf(line, sizeof line, "protocol=%u\n", PROTOCOL_VERSION);
    s += line;
    snprintf(line, sizeof line, "rvv_vlen_bytes=%d\n", ggml_cpu_get_rvv_vlen());
    s += line;
    snprintf(line, sizeof line, "ggml_version=%s\nggml_commit=%s\n", ggml_version(), ggml_commit());
    s += line;
    const struct { const char * name; int on; } feats[] = {
#if defined(__riscv_v_intrinsic)
        {"v", 1},
#else
        {"v", 0},
#endif
#if defined(__riscv_zfh)
        {"zfh", 1},
#else
        {"zfh", 0},
#endif
#if defined(__riscv_zvfh)
        {"zvfh", 1},
#else
        {"zvfh", 0},
#endif
#if defined(__riscv_zvfhmin)
        {"zvfhmin", 1},
#else
        {"zvfhmin", 0},
#endif
#if defined(__riscv_zvfbfmin)
        {"zvfbfmin", 1},
#else
        {"zvfbfmin", 0},
#endif
#if defined(__riscv_zvfbfwma)
        {"zvfbfwma", 1},
#else
        {"zvfbfwma", 0},
#endif
    };
    for (const auto & f : feats) {
        snprintf(line, sizeof line, "feature.%s=%d\n", f.name, f.on);
        s += line;
    }
    s += "kernels=";
    for (size_t i = 0; i < sizeof KERNELS / sizeof KERNELS[0]; ++i) {
        if (i) s += ",";
        s += KERNELS[i].name;
    }
    s += "\n";
    return s;
}

// Executes one instruction of each vector extension the build was compiled
// for, so that an emulator lacking one fails here (SIGILL at start-up, which
// the harness reports as a missing extension) rather than inside a test.
void probe_extensions() {
#if defined(__riscv_v_intrinsic)
    volatile float sink = 0;
    size_t vl = __riscv_vsetvl_e32m1(4);
    vfloat32m1_t acc = __riscv_vfmv_v_f_f32m1(0.0f, vl);
#if defined(__riscv_zvfh)
    vfloat16mf2_t h = __riscv_vfmv_v_f_f16mf2((_Float16)1.0f, vl);
    acc = __riscv_vfwmacc_vv_f32m1(acc, h, h, vl);
#endif
#if defined(__riscv_zvfbfwma)
    vbfloat16mf2_t b = __riscv_vfncvtbf16_f_f_w_bf16mf2(acc, vl);
    acc = __riscv_vfwmaccbf16_vv_f32m1(acc, b, b, vl);
#endif
    sink = __riscv_vfmv_f_s_f32m1_f32(acc);
    (void)sink;
#endif
}

// -------------------------------------------------------------- requests ----

void respond(uint32_t status, const std::string & msg, uint64_t ns, const std::vector<Buffer> * outs) {
    std::string frame;
    put(frame, RESPONSE_MAGIC);
    put(frame, status);
    put(frame, ns);
    put(frame, static_cast<uint32_t>(msg.size()));
    frame += msg;
    uint32_t n_out = 0;
    if (outs) {
        for (const auto & b : *outs) n_out += b.kind != BUF_IN;
    }
    put(frame, n_out);
    write_exact(frame.data(), frame.size());
    if (!outs) return;
    for (const auto & b : *outs) {
        if (b.kind == BUF_IN) continue;
        uint64_t sz = b.size;
        write_exact(&sz, sizeof sz);
        write_exact(b.data(), b.size);
    }
}

uint64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Reads the body of a CALL request into c.  Returns false on EOF / garbage.
bool read_call(Call & c, uint32_t & repeat) {
    uint32_t name_len, n_ip, n_fp, n_bufs;
    if (!read_val(name_len) || name_len > 256) return false;
    c.name.resize(name_len);
    if (!read_exact(&c.name[0], name_len)) return false;
    if (!read_val(repeat) || !read_val(n_ip) || n_ip > 64) return false;
    c.ip.resize(n_ip);
    if (n_ip && !read_exact(c.ip.data(), n_ip * sizeof(int64_t))) return false;
    if (!read_val(n_fp) || n_fp > 64) return false;
    c.fp.resize(n_fp);
    if (n_fp && !read_exact(c.fp.data(), n_fp * sizeof(double))) return false;
    if (!read_val(n_bufs) || n_bufs > 64) return false;
    c.bufs.resize(n_bufs);
    for (auto & b : c.bufs) {
        uint32_t kind, fill;
        uint64_t size;
        if (!read_val(kind) || !read_val(fill) || !read_val(size)) return false;
        b.kind = kind;
        b.fill = static_cast<unsigned char>(fill);
        // Input guards hold 0xFF (a NaN in every float format) so that an
        // over-read which reaches the result poisons it; output guards hold
        // a byte that is checked after the call.
        if (!b.allocate(size, kind == BUF_IN ? 0xFF : GUARD_BYTE_OUT)) return false;
        if (kind == BUF_OUT) {
            memset(b.data(), b.fill, size);
        } else if (!read_exact(b.data(), size)) {
            return false;
        }
    }
    return true;
}

void serve_call() {
    Call c;
    uint32_t repeat = 1;
    if (!read_call(c, repeat)) _exit(4);
    const Kernel * k = nullptr;
    for (const auto & cand : KERNELS) {
        if (c.name == cand.name) { k = &cand; break; }
    }
    if (!k) {
        respond(ST_UNKNOWN_KERNEL, "unknown kernel: " + c.name, 0, nullptr);
        return;
    }
    if (repeat == 0) repeat = 1;
    uint64_t t0 = now_ns();
    uint32_t st = ST_OK;
    for (uint32_t r = 0; r < repeat && st == ST_OK; ++r) st = k->fn(c);
    uint64_t ns = now_ns() - t0;
    if (st != ST_OK) {
        respond(st, c.err, ns, nullptr);
        return;
    }
    for (size_t i = 0; i < c.bufs.size(); ++i) {
        long where = 0;
        if (!c.bufs[i].guards_intact(where)) {
            char m[200];
            snprintf(m, sizeof m, "%s wrote outside buffer %zu (%zu bytes): first clobbered guard byte at offset %ld",
                     c.name.c_str(), i, c.bufs[i].size, where);
            respond(ST_GUARD, m, ns, nullptr);
            return;
        }
    }
    respond(ST_OK, c.info, ns, &c.bufs);
}

}  // namespace

int main(int argc, char ** argv) {
    // Frames go to a private copy of stdout; anything ggml prints goes to stderr.
    out_fd = dup(1);
    dup2(2, 1);
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) return 0;  // emulator property probe

    probe_extensions();
    ggml_cpu_init();

    for (;;) {
        uint32_t magic;
        uint16_t version, op;
        if (!read_val(magic)) return 0;  // harness closed the pipe
        if (magic != REQUEST_MAGIC || !read_val(version) || !read_val(op)) _exit(4);
        if (version != PROTOCOL_VERSION) {
            respond(ST_BAD_REQUEST, "protocol version mismatch", 0, nullptr);
            _exit(4);
        }
        switch (op) {
            case OP_HELLO: respond(ST_OK, hello_text(), 0, nullptr); break;
            case OP_CALL: serve_call(); break;
            case OP_QUIT: return 0;
            default: _exit(4);
        }
    }
}
