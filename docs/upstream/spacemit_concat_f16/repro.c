// forward_concat: ggml_concat of f16 [1, 1, 1, 1] and f16 [1, 1, 1, 1] along dim 0 -> f16, on 1 thread. ggml's public API only; the call died of SIGABRT where the test ran: whether this program dies is the verdict.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char * S0_HEX = "0630";
static const char * S1_HEX = "44c0";
static const double expected[2] = {0.125732421875, -2.1328125}, bound[1] = {0};
#define GUARD 256  // bytes of 0xff after every tensor's memory (NaN in f32 and f16)
static void * guarded(size_t n, const char * h) {  // h: hex bytes, "hh*N" = N bytes hh; NULL: 0xff
    unsigned char * p = (unsigned char *) malloc(n + GUARD), * q = p;  unsigned v;  int k, len;
    memset(p, 0xff, n + GUARD);
    while (h && sscanf(h, " %2x%n", &v, &len) == 1) {
        h += len; k = 1;
        if (*h == '*' && sscanf(h + 1, "%d%n", &k, &len) == 1) h += 1 + len;
        while (k-- > 0) *q++ = (unsigned char) v;
    }
    return p;
}
static struct ggml_tensor * tensor(struct ggml_context * ctx, enum ggml_type t, int64_t ne0, int64_t ne1, int64_t ne2,
                                   int64_t ne3, const char * h) {
    struct ggml_tensor * x = ggml_new_tensor_4d(ctx, t, ne0, ne1, ne2, ne3);
    x->data = guarded(ggml_nbytes(x), h);
    return x;
}
static int clobbered(const struct ggml_tensor * x) {  // 1 + the first changed guard byte, or 0
    const unsigned char * g = (const unsigned char *) x->data + ggml_nbytes(x);
    for (int i = 0; i < GUARD; ++i) if (g[i] != 0xff) return i + 1;
    return 0;
}
int main(void) {
    struct ggml_init_params p = { 1u << 20, NULL, true };  struct ggml_context * ctx = ggml_init(p);
    struct ggml_tensor * s0 = tensor(ctx, GGML_TYPE_F16, 1, 1, 1, 1, S0_HEX);
    struct ggml_tensor * s1 = tensor(ctx, GGML_TYPE_F16, 1, 1, 1, 1, S1_HEX);
    struct ggml_tensor * c = ggml_concat(ctx, s0, s1, 0);
    c->data = guarded(ggml_nbytes(c), NULL);
    struct ggml_cgraph * g = ggml_new_graph(ctx);  ggml_build_forward_expand(g, c);
    ggml_backend_t cpu = ggml_backend_cpu_init();  ggml_backend_cpu_set_n_threads(cpu, 1);
    ggml_backend_graph_compute(cpu, g);
    int past = clobbered(c);
    if (past) printf("the op wrote past the end of its result: guard byte %d of 256 changed\n", past - 1);
    int bad = 0;
    for (int i = 0; i < 2; ++i) {
        double got = ggml_get_f32_1d(c, i), want = expected[i], tol = bound[0];
        int same = got == want && (tol > 0 || signbit(got) == signbit(want));  // bound 0: the same number
        if (!(same || fabs(got - want) <= tol || (isnan(got) && isnan(want))) && bad++ < 4)
            printf("out[%d] = %.9g, expected %.9g (bound %.3g)\n", i, got, want, tol);
    }
    printf("VLEN %d: %d of 2 wrong%s\n", ggml_cpu_get_rvv_vlen() * 8, bad, past ? ", and a write past the result" : "");
    return bad != 0 || past != 0;
}
