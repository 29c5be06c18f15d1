// Self-test kernels: they misbehave on purpose, so that the harness's own
// tests (tests/test_pool.py) can show that crashes, hangs and out-of-bounds
// writes are reported and that the session goes on.

#include "server.h"

#include <string.h>
#include <unistd.h>

namespace {

using namespace rvvdiff;

uint32_t k_segv(Call &) {
    volatile int * p = nullptr;
    *p = 1;
    return ST_OK;
}

uint32_t k_sigill(Call &) {
    __asm__ volatile(".word 0x00000000");  // the all-zero word is defined as illegal
    return ST_OK;
}

uint32_t k_hang(Call &) {
    for (;;) pause();
    return ST_OK;
}

// Flips one byte just past the end (ip[0] >= 0) or just before the start
// (ip[0] < 0) of buffer 0.
uint32_t k_oob(Call & c) {
    if (!c.shape(1, 0, 1)) return ST_BAD_REQUEST;
    unsigned char * d = c.buf<unsigned char>(0);
    if (c.ip[0] < 0) d[-1] ^= 0xFF; else d[c.bufs[0].size] ^= 0xFF;
    return ST_OK;
}

// Copies buffer 0 into buffer 1 and echoes the parameters in info.
uint32_t k_echo(Call & c) {
    if (c.bufs.size() != 2 || !c.size_is(1, c.bufs[0].size)) return c.bad("selftest_echo needs two equal buffers");
    memcpy(c.bufs[1].data(), c.bufs[0].data(), c.bufs[0].size);
    std::string ips, fps;
    for (auto v : c.ip) ips += std::to_string(v) + ",";
    for (auto v : c.fp) fps += std::to_string(v) + ",";
    c.note("ip", ips);
    c.note("fp", fps);
    return ST_OK;
}

// Reads 8 bytes at offset 1 of buffer 0 into buffer 1 with one misaligned access: ip[0] = 0 a
// scalar ld (Linux, QEMU and the Spike runtime perform it), 1 a vle32.v of two elements (the RVV
// specification lets a hart trap on it: Spike does, QEMU does not).
uint32_t k_misaligned(Call & c) {
    if (!c.shape(1, 0, 2) || !c.size_is(1, 8) || c.bufs[0].size < 9) return c.bad("selftest_misaligned: bad shape");
    const unsigned char * src = c.buf<unsigned char>(0) + 1;
    unsigned char * dst = c.buf<unsigned char>(1);
    if (c.ip[0] == 0) {
        uint64_t v;
        __asm__ volatile("ld %0, 0(%1)" : "=r"(v) : "r"(src) : "memory");
        memcpy(dst, &v, 8);
        return ST_OK;
    }
#if defined(__riscv_v_intrinsic)
    __asm__ volatile(
        "vsetivli zero, 2, e32, m1, ta, ma\n\t"
        "vle32.v v8, (%0)\n\t"
        "vsetivli zero, 8, e8, m1, ta, ma\n\t"
        "vse8.v v8, (%1)" ::"r"(src), "r"(dst) : "v8", "memory");
    return ST_OK;
#else
    return c.bad("selftest_misaligned: a vector access needs a V build");
#endif
}

RVVDIFF_KERNEL("selftest_misaligned", k_misaligned);
RVVDIFF_KERNEL("selftest_segv", k_segv);
RVVDIFF_KERNEL("selftest_sigill", k_sigill);
RVVDIFF_KERNEL("selftest_hang", k_hang);
RVVDIFF_KERNEL("selftest_oob", k_oob);
RVVDIFF_KERNEL("selftest_echo", k_echo);

}  // namespace
