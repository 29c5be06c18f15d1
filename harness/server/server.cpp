// rvvdiff kernel server: the request loop.
//
// A long-lived process, run under qemu-riscv64 at one VLEN, linked statically
// against one ISA build of ggml.  It answers framed binary requests on stdin
// with framed responses on stdout (the frame layout is documented in
// harness/protocol.py, the other end of the pipe).  Every buffer is placed
// between guard regions; a kernel that writes outside its buffers is reported
// as a guard violation naming the kernel and the buffer.  The kernels
// themselves are registered by the k_*.cpp files (see server.h).

#include "server.h"

#include "rvvdiff_tree.h"

#include "ggml-cpu.h"
#include "ggml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__riscv_v_intrinsic)
#include <riscv_vector.h>
#endif

namespace {

using namespace rvvdiff;

constexpr uint32_t REQUEST_MAGIC = 0x51445652;   // "RVDQ"
constexpr uint32_t RESPONSE_MAGIC = 0x52445652;  // "RVDR"
constexpr uint16_t PROTOCOL_VERSION = 1;

enum Op : uint16_t { OP_HELLO = 0, OP_CALL = 1, OP_QUIT = 2 };

// The top bit of a CALL's repeat count asks for the instruction and cycle counters around the
// last repetition (rvvdiff's cost measure, harness/cost/measure/spike_count.py): exact on Spike, where
// every instruction retires in one cycle; host-time-based under QEMU, which the harness never uses.
constexpr uint32_t REPEAT_MEASURE = 1u << 31;

#if defined(__riscv)
inline uint64_t read_instret() {
    uint64_t v;
    __asm__ volatile("rdinstret %0" : "=r"(v));
    return v;
}
inline uint64_t read_cycle() {
    uint64_t v;
    __asm__ volatile("rdcycle %0" : "=r"(v));
    return v;
}
#else
inline uint64_t read_instret() { return 0; }
inline uint64_t read_cycle() { return 0; }
#endif

int out_fd = 1;

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

// Facts the harness checks or reports: the VLEN ggml detected, which extensions
// this build was compiled for (they decide which code paths exist), the kernels.
std::string hello_text() {
    std::string s;
    char line[200];
#if RVVDIFF_HAS_ggml_cpu_get_rvv_vlen
    const int vlen_bytes = ggml_cpu_get_rvv_vlen();  // what ggml itself detected
    const char * vlen_from = "ggml_cpu_get_rvv_vlen";
#else
    const int vlen_bytes = (int)__riscv_vlenb();  // a tree older than ggml's own detection
    const char * vlen_from = "vlenb";
#endif
    snprintf(line, sizeof line, "protocol=%u\nrvv_vlen_bytes=%d\nrvv_vlen_from=%s\nggml_version=%s\nggml_commit=%s\n",
             PROTOCOL_VERSION, vlen_bytes, vlen_from, ggml_version(), ggml_commit());
    s += line;
    const struct { const char * name; int on; } feats[] = {
#define RVVDIFF_FEATURE(name, macro) {name, macro},
#if defined(__riscv_v_intrinsic)
        RVVDIFF_FEATURE("v", 1)
#else
        RVVDIFF_FEATURE("v", 0)
#endif
#if defined(__riscv_zfh)
        RVVDIFF_FEATURE("zfh", 1)
#else
        RVVDIFF_FEATURE("zfh", 0)
#endif
#if defined(__riscv_zvfh)
        RVVDIFF_FEATURE("zvfh", 1)
#else
        RVVDIFF_FEATURE("zvfh", 0)
#endif
#if defined(__riscv_zvfhmin)
        RVVDIFF_FEATURE("zvfhmin", 1)
#else
        RVVDIFF_FEATURE("zvfhmin", 0)
#endif
#if defined(__riscv_zvfbfmin)
        RVVDIFF_FEATURE("zvfbfmin", 1)
#else
        RVVDIFF_FEATURE("zvfbfmin", 0)
#endif
#if defined(__riscv_zvfbfwma)
        RVVDIFF_FEATURE("zvfbfwma", 1)
#else
        RVVDIFF_FEATURE("zvfbfwma", 0)
#endif
#undef RVVDIFF_FEATURE
    };
    for (const auto & f : feats) {
        snprintf(line, sizeof line, "feature.%s=%d\n", f.name, f.on);
        s += line;
    }
    s += "kernels=";
    for (size_t i = 0; i < registry().size(); ++i) {
        if (i) s += ",";
        s += registry()[i].name;
    }
    s += "\n";
    return s;
}

// Executes one instruction of each vector extension the build was compiled
// for, so that an emulator lacking one fails here (SIGILL at start-up, which
// the harness reports as a missing extension) rather than inside a test.
void probe_extensions() {
#if defined(__riscv_v_intrinsic)
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
    volatile float sink = __riscv_vfmv_f_s_f32m1_f32(acc);
    (void)sink;
#endif
}

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

// Reads the body of a CALL request.  False on EOF or a malformed frame.
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
        if (!read_val(kind) || !read_val(fill) || !read_val(size) || kind > BUF_INOUT) return false;
        b.kind = kind;
        b.fill = static_cast<unsigned char>(fill);
        if (!b.allocate(size, kind == BUF_IN ? GUARD_BYTE_IN : GUARD_BYTE_OUT)) return false;
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
    for (const auto & cand : registry()) {
        if (c.name == cand.name) { k = &cand; break; }
    }
    if (!k) {
        respond(ST_UNKNOWN_KERNEL, "unknown kernel: " + c.name, 0, nullptr);
        return;
    }
    const bool measure = (repeat & REPEAT_MEASURE) != 0;
    repeat &= ~REPEAT_MEASURE;
    if (repeat == 0) repeat = 1;
    const uint64_t t0 = now_ns();
    uint32_t st = ST_OK;
    uint64_t instret = 0, cycles = 0;
    for (uint32_t r = 0; r < repeat && st == ST_OK; ++r) {
        c.info.clear();  // every repetition notes afresh: what follows the loop is the same for any repeat
        if (measure) {
            const uint64_t i0 = read_instret(), c0 = read_cycle();
            st = k->fn(c);
            const uint64_t c1 = read_cycle(), i1 = read_instret();
            instret = i1 - i0;
            cycles = c1 - c0;
        } else {
            st = k->fn(c);
        }
    }
    const uint64_t ns = now_ns() - t0;
    if (measure && st == ST_OK) {
        c.note("cost.instret", std::to_string(instret));
        c.note("cost.cycles", std::to_string(cycles));
    }
    if (st != ST_OK) {
        respond(st, c.err, ns, nullptr);
        return;
    }
    for (size_t i = 0; i < c.bufs.size(); ++i) {
        long where = 0;
        if (!c.bufs[i].guards_intact(where)) {
            char m[256];
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
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) return 0;

    probe_extensions();
    ggml_cpu_init();

    for (;;) {
        uint32_t magic;
        uint16_t version, op;
        if (!read_val(magic)) return 0;  // the harness closed the pipe
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
