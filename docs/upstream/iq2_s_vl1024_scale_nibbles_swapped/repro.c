// ggml_vec_dot_iq2_s_q8_K: one IQ2_S row times one row of its vec_dot_type, k = 256: mul_mat calls the type's vec_dot once. ggml's public API only; exit status 1 while the result is wrong.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
static const char * A_HEX = "003c 00*72 10 00*7";
static const char * B_HEX = "0000803f 01*16 00*240 10 00*31";
static const double expected[1] = {16.0}, bound[1] = {0};
static struct ggml_tensor * tensor(struct ggml_context * ctx, enum ggml_type t, int k, int rows, const char * h) {
    struct ggml_tensor * x = ggml_new_tensor_2d(ctx, t, k, rows);  // h: hex bytes, "hh*N" = N bytes hh
    unsigned char * p = (unsigned char *) x->data;  unsigned v;  int n, len;
    while (sscanf(h, " %2x%n", &v, &len) == 1) {
        h += len; n = 1;
        if (*h == '*' && sscanf(h + 1, "%d%n", &n, &len) == 1) h += 1 + len;
        while (n-- > 0) *p++ = (unsigned char) v;
    }
    return x;
}
int main(void) {
    struct ggml_init_params p = { 16u << 20, NULL, false };  struct ggml_context * ctx = ggml_init(p);
    struct ggml_tensor * a = tensor(ctx, GGML_TYPE_IQ2_S, 256, 1, A_HEX);
    struct ggml_tensor * c = ggml_mul_mat(ctx, a, tensor(ctx, ggml_get_type_traits_cpu(a->type)->vec_dot_type, 256, 1, B_HEX));
    struct ggml_cgraph * g = ggml_new_graph(ctx);  ggml_build_forward_expand(g, c);
    ggml_backend_t cpu = ggml_backend_cpu_init();  ggml_backend_cpu_set_n_threads(cpu, 1);  ggml_backend_graph_compute(cpu, g);
    int bad = 0;
    for (int i = 0; i < 1; ++i) {
        double got = ((float *) c->data)[i], want = expected[i], tol = bound[0];
        if (!(got == want || fabs(got - want) <= tol || (isnan(got) && isnan(want))) && bad++ < 4)
            printf("C[%d] = %.9g, expected %.9g (bound %.3g)\n", i, got, want, tol);
    }
    printf("VLEN %d: %d of 1 wrong\n", ggml_cpu_get_rvv_vlen() * 8, bad);
    return bad != 0;
}
