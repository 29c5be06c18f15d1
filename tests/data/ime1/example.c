/* The computation of the example in SpacemiT's IME specification (example/vmadot-gemm-demo.c), re-expressed:
 * C (4 x 4, int32) = A (4 x 8, int8) x B (8 x 4, int8), with B first packed by columns (each column's 8
 * elements contiguous, made by strided vector stores as the example does), then one `vmadot` at e8, m1 on a
 * VLEN 256 machine (vl * SEW = 256: the 4x4x8 MAC unit), checked against a plain reference loop.
 * Runs ROUNDS matrices: a seeded pseudo-random sequence, plus all -128 and all 127 matrices.
 * Exit 0: every IME result equals the reference; 1: a mismatch (printed); 2: not VLEN 256. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { M = 4, N = 4, K = 8, ROUNDS = 200 };

static void reference(const int8_t a[M * K], const int8_t b[K * N], int32_t c[M * N]) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            int32_t sum = 0;
            for (int k = 0; k < K; ++k)
                sum += a[i * K + k] * b[k * N + j];
            c[i * N + j] = sum;
        }
}

/* Row k of B (N bytes) stored with a stride of K bytes from packed + k: packed[j * K + k] = B[k][j]. */
static void pack_b(const int8_t b[K * N], int8_t packed[N * K]) {
    for (int k = 0; k < K; ++k)
        __asm__ volatile("vsetivli t0, %[n], e8, mf8\n\tvle8.v v0, (%[src])\n\tvsse8.v v0, (%[dst]), %[stride]"
                         : : [n] "i"(N), [src] "r"(b + k * N), [dst] "r"(packed + k), [stride] "r"((long)K)
                         : "t0", "v0", "memory");
}

static void ime(const int8_t a[M * K], const int8_t packed[N * K], int32_t c[M * N]) {
    __asm__ volatile("vsetvli t0, zero, e32, m2\n\tvxor.vv v28, v28, v28\n\t"
                     "vsetvli t0, zero, e8, m1\n\tvle8.v v0, (%[a])\n\tvle8.v v1, (%[b])\n\t"
                     "vmadot v28, v0, v1\n\t"
                     "vsetvli t0, zero, e32, m2\n\tvse32.v v28, (%[c])"
                     : : [a] "r"(a), [b] "r"(packed), [c] "r"(c) : "t0", "v0", "v1", "v28", "v29", "memory");
}

static uint32_t state = 12345;
static int8_t next(void) { state = state * 1103515245u + 12345u; return (int8_t)(state >> 16); }

int main(void) {
    uint64_t vlenb;
    __asm__ volatile("csrr %0, vlenb" : "=r"(vlenb));
    if (vlenb != 32) {
        printf("the example is written for VLEN 256, not %d\n", (int)(vlenb * 8));
        return 2;
    }
    int8_t a[M * K], b[K * N], packed[N * K];
    int32_t want[M * N], got[M * N];
    for (int round = 0; round < ROUNDS; ++round) {
        for (int i = 0; i < M * K; ++i) {
            a[i] = round == 0 ? -128 : round == 1 ? 127 : next();
            b[i] = round == 0 ? -128 : round == 1 ? 127 : next();
        }
        pack_b(b, packed);
        reference(a, b, want);
        ime(a, packed, got);
        if (memcmp(want, got, sizeof want) != 0) {
            for (int i = 0; i < M * N; ++i)
                if (want[i] != got[i])
                    printf("round %d: C[%d][%d] = %d, the reference loop gives %d\n", round, i / N, i % N, got[i],
                           want[i]);
            return 1;
        }
        if (round == 2) {
            printf("round 2: C =");
            for (int i = 0; i < M * N; ++i)
                printf(" %d", got[i]);
            printf("\n");
        }
    }
    printf("%d rounds of C(4x4) = A(4x8) x B(8x4): the vmadot result equals the reference loop\n", ROUNDS);
    return 0;
}
