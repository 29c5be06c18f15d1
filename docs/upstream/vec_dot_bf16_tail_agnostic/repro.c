// ggml_vec_dot_bf16: mul_mat of 4 BF16 rows and 2 BF16 rows, k = 15. ggml's public API only; exit status 1 while the result is wrong.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
static const char * A_HEX =
    "c0400040000080c040c000c1e0c000c1c0c0a0 40*3 e040 00*3 40004180400040803f803fe04080c0a0 40*3 "
    "00c100c0c040803f00c1a0408040c040c0c0e0c0c04000c1803fe0c040c0000080bf00c000c100c1c0c000c1404000004040 "
    "80c00040804000c080bf0041a040004100c0404000414040 ";
static const char * B_HEX =
    "c0400040000080c040c000c1e0c000c1c0c0a0 40*3 e040 00*3 40004180400040803f803fe04080c0a0 40*3 "
    "00c100c0c040803f00c1a0408040 ";
static const double expected[8] = {429.0, 81.0, -54.0, 45.0, 81.0, 331.0, -109.0, -4.0}, bound[1] = {0};
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
    struct ggml_tensor * a = tensor(ctx, GGML_TYPE_BF16, 15, 4, A_HEX);
    struct ggml_tensor * c = ggml_mul_mat(ctx, a, tensor(ctx, GGML_TYPE_BF16, 15, 2, B_HEX));
    struct ggml_cgraph * g = ggml_new_graph(ctx);  ggml_build_forward_expand(g, c);
    ggml_backend_t cpu = ggml_backend_cpu_init();  ggml_backend_cpu_set_n_threads(cpu, 1);  ggml_backend_graph_compute(cpu, g);
    int bad = 0;
    for (int i = 0; i < 8; ++i) {
        double got = ((float *) c->data)[i], want = expected[i], tol = bound[0];
        if (!(got == want || fabs(got - want) <= tol || (isnan(got) && isnan(want))) && bad++ < 4)
            printf("C[%d] = %.9g, expected %.9g (bound %.3g)\n", i, got, want, tol);
    }
    printf("VLEN %d: %d of 8 wrong\n", ggml_cpu_get_rvv_vlen() * 8, bad);
    return bad != 0;
}
