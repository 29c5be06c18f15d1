// rvv_transposed_s32_mn_to_nm: ggml_cont of ggml_permute(f32 [33, 1, 1, 1], 1, 0, 2, 3) -> f32, on 1 thread. ggml's public API only; exit status 1 while the result is wrong.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char * S0_HEX =
    "6cbf003e7f4607bebdf2233fdfd5d63da12109bffd22b93e79e9a63fe673723ffe2734bf55f9a1bfea8e1fbf6e45293d4ecd "
    "14c0ec0a60be037a9fbfe0753bbf8f540bbf18f2a1be3dc1d23e1471853f979e03be46e8ae3f334a2abf21f9b33ed249673f "
    "8589c03df8553ebf32f66bbf0a5beabed57a613e2b3b81bf1f3256bee20b23be ";
static const double expected[33] = {0.1257302165031433, -0.13210485875606537, 0.6404226422309875, 0.10490011423826218, -0.5356693863868713, 0.3615950644016266, 1.3040000200271606, 0.9470809698104858, -0.7037352323532104, -1.2654215097427368, -0.6232744455337524, 0.04132597893476486, -2.32503080368042, -0.218791663646698, -1.2459110021591187, -0.7322673797607422, -0.5442590117454529, -0.3163001537322998, 0.4116305410861969, 1.042513370513916, -0.12853465974330902, 1.3664634227752686, -0.6651946902275085, 0.35151007771492004, 0.9034701585769653, 0.0940122976899147, -0.7434992790222168, -0.9217253923416138, -0.4577258229255676, 0.22019512951374054, -1.0096181631088257, -0.20917557179927826, -0.15922501683235168}, bound[1] = {0};
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
    struct ggml_tensor * s0 = ggml_permute(ctx, tensor(ctx, GGML_TYPE_F32, 33, 1, 1, 1, S0_HEX), 1, 0, 2, 3);
    struct ggml_tensor * c = ggml_cont(ctx, s0);
    c->data = guarded(ggml_nbytes(c), NULL);
    struct ggml_cgraph * g = ggml_new_graph(ctx);  ggml_build_forward_expand(g, c);
    ggml_backend_t cpu = ggml_backend_cpu_init();  ggml_backend_cpu_set_n_threads(cpu, 1);
    ggml_backend_graph_compute(cpu, g);
    int past = clobbered(c);
    if (past) printf("the op wrote past the end of its result: guard byte %d of 256 changed\n", past - 1);
    int bad = 0;
    for (int i = 0; i < 33; ++i) {
        double got = ggml_get_f32_1d(c, i), want = expected[i], tol = bound[0];
        int same = got == want && (tol > 0 || signbit(got) == signbit(want));  // bound 0: the same number
        if (!(same || fabs(got - want) <= tol || (isnan(got) && isnan(want))) && bad++ < 4)
            printf("out[%d] = %.9g, expected %.9g (bound %.3g)\n", i, got, want, tol);
    }
    printf("VLEN %d: %d of 33 wrong%s\n", ggml_cpu_get_rvv_vlen() * 8, bad, past ? ", and a write past the result" : "");
    return bad != 0 || past != 0;
}
