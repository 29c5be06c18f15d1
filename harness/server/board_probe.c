/* What a RISC-V Linux host (a board, or the stand-in board of the tests) offers the kernel server:
 * its VLEN (vlenb), its extensions (riscv_hwprobe and /proc/cpuinfo's isa line), its cores, and what
 * its vector unit does with tail- and mask-agnostic elements (harness/emulators/board.py reads the
 * key=value lines).  Built with -march=rv64gcv; run only where the host has V. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_E32 2048 /* VLEN 65536 at e32, m1 */

static const char *classify(const uint32_t *buf, size_t from, size_t to, uint32_t kept) {
    size_t same = 0, ones = 0;
    for (size_t i = from; i < to; ++i) {
        same += buf[i] == kept;
        ones += buf[i] == 0xFFFFFFFFu;
    }
    if (to <= from) return "unknown";
    if (same == to - from) return "undisturbed";
    if (ones == to - from) return "ones";
    return "mixed";
}

static uint32_t buf[MAX_E32];

static const char *tail_policy(void) {
    size_t vlmax, vl, one = 1;
    __asm__ volatile("vsetvli %0, zero, e32, m1, tu, mu\n\tvmv.v.i v8, 7" : "=r"(vlmax) :: "v8");
    __asm__ volatile("vsetvli %0, %1, e32, m1, ta, ma\n\tvadd.vi v8, v8, 1" : "=r"(vl) : "r"(one) : "v8");
    __asm__ volatile("vsetvli %0, zero, e32, m1, tu, mu\n\tvse32.v v8, (%1)" : "=r"(vlmax) : "r"(buf) : "memory");
    return classify(buf, 1, vlmax, 7);
}

static const char *mask_policy(void) {
    size_t vlmax, vl, one = 1;
    __asm__ volatile("vsetvli %0, zero, e8, m1, tu, mu\n\tvmv.v.i v0, 0\n\tvmv.s.x v0, %1" : "=&r"(vl) : "r"(one) : "v0");
    __asm__ volatile("vsetvli %0, zero, e32, m1, tu, mu\n\tvmv.v.i v8, 7" : "=r"(vlmax) :: "v8");
    __asm__ volatile("vsetvli %0, zero, e32, m1, ta, ma\n\tvadd.vi v8, v8, 1, v0.t" : "=r"(vl) :: "v8");
    __asm__ volatile("vsetvli %0, zero, e32, m1, tu, mu\n\tvse32.v v8, (%1)" : "=r"(vlmax) : "r"(buf) : "memory");
    return classify(buf, 1, vlmax, 7);
}

int main(void) {
    uint64_t vlenb;
    __asm__ volatile("csrr %0, vlenb" : "=r"(vlenb));
    printf("vlenb=%llu\n", (unsigned long long)vlenb);
    printf("cores=%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    struct { int64_t key; uint64_t value; } pair = {4 /* RISCV_HWPROBE_KEY_IMA_EXT_0 */, 0};
    long r = syscall(258 /* __NR_riscv_hwprobe */, &pair, 1, 0, NULL, 0);
    if (r == 0 && pair.key == 4) printf("hwprobe_ima_ext_0=%llu\n", (unsigned long long)pair.value);
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "isa", 3) == 0 && strchr(line, ':')) {
            char *v = strchr(line, ':') + 1;
            while (*v == ' ' || *v == '\t') ++v;
            printf("cpuinfo_isa=%s", v);
            if (!strchr(v, '\n')) putchar('\n');
            break;
        }
    }
    if (f) fclose(f);
    printf("tail_agnostic=%s\n", tail_policy());
    printf("mask_agnostic=%s\n", mask_policy());
    return 0;
}
