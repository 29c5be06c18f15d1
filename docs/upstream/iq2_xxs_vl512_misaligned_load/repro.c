// ggml_vec_dot_iq2_xxs_q8_K_vl512: one IQ2_XXS row times one row of its vec_dot_type, k = 256: mul_mat calls the type's vec_dot once. ggml's public API only; exit status 1 while the result is wrong.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
static const char * A_HEX =
    "00bc2279f3bd068366a852c1bb9651f3cd18ec08f6a4e724d26facd2aeb0daf2a972cd3fa02fd44f487078de451f5f6c246d "
    "ee453351e4d3ca3aca414c46c1682afa ";
static const char * B_HEX =
    "0000803d1afd2827202ef5d8e9f6dc1004d2d616d029fb2828f6faf604fbe11e2f2604ee2ad3cff7ed2d1fd92b24e415eee4 "
    "2fe80a0c08ded201d31aebeff6092ddae81d0bfa120029f01906d61c2f30de1d10e7fef31f0ade2d11d0d6221b1012e222d0 "
    "0bd9eb02e51c102ce6dd01f02b02eed4e9d501d22be3e02e110c1204281de5dc14dd1bd00fe73112dfe5fcf90ed1170efbf8 "
    "d5e6e5160112dddfef04fde925dcf710d61dd112fc10f4ffd8e12027d8e9db28f9e21afcdce2142d14e8f303002cd8e82e31 "
    "ee27d0e8d3e0dd13faf2f6e205e9f4fbe813da220423051505d40d1fe9152afb04d30e0d1dea0316290ffe1be3f3d412f02c "
    "2c1c1b2e10d612e9210f0e006f000600a1ff92000f00b1ffe6ffd2ff52ff9dff110053ff1a0086007a00 ";
static const double expected[1] = {864.6015625}, bound[1] = {0};
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
    struct ggml_tensor * a = tensor(ctx, GGML_TYPE_IQ2_XXS, 256, 1, A_HEX);
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
