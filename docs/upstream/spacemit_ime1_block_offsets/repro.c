// make_block_q4_1x16: mul_mat of 16 Q4_1 rows in CPU_RISCV64_SPACEMIT and 1 F32 rows, k = 32. ggml's public API only; exit status 1 while the result is wrong.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
static const char * A_HEX =
    "5d2413b4fe031831f8b1e133b85e7d009ed4a9279a292ab88844f7e12f82f0d8b5a30abd79173e8a5a274ab4ba819cdfaf5c "
    "a4991b0fa963995239265d1c0cac61d0666193fa6497709a72a38cadf426a91d92a48f705b3d0d67d31867f7f33701ab034c "
    "292934ae7fdf17a98821d8d87bf19be7f59147251318aea49031c0ed3e8d0c2e60e2f8a495910f604e28ada5fb69363db609 "
    "f8e09177c28c7a5272c0eb273da40e06b85fcd07e81f6af71ba8ba6d14861021e3ac6edfae580e9747afdd5ae78487c3cae8 "
    "b71dffa8ff2669ee4e0193c0becfa423d86bd8d0401d83acf803dda07ccbf38316b93b393132e85cd61cb5a91b2d65584ff2 "
    "dd92fc57234516f33871ad2082ac33fa2883f385e6e5c4be9394d46df2e0bf215bad5f69b6ec18113f6e29848af3be40c9ce "
    "cf2252aaaead4fb722a1ebf84c559e65bb332b0c ";
static const char * B_HEX =
    "837f5ebd1c172bbdbf382ebd290734bc560194bd446ec1bbfa0cf5bcfbc2e43cf1f3f43c8535323dec78c43cc135d9ba751b "
    "dc3c9bb3403df951a7bcf93f9c3cc0caaeba7852383dc13ed6bc51641abc7284393c0727043c6ed951bd4466383cecae72bb "
    "7680f5bb66079fbb1e3ae03ba77f68bd39b7463d7187dcbc92728fbd ";
static const double expected[16] = {0.0309792810868581, -0.021393346764781995, 0.0046540021329288805, 0.015016013742871204, -0.004516537070992088, -0.07784043844442756, -0.00040015125065073764, -0.09761400408335508, -0.07242165761108144, -0.012096664964271753, -0.011334404296792222, -0.0012187626733428658, -0.003300112260988808, -0.00037480920277888075, -0.016802317162476488, -0.013756660812715982}, bound[16] = {1.5483947903992993e-08, 5.1849191686519444e-08, 2.296637648786938e-08, 3.580097627905044e-09, 2.6802472977317377e-09, 2.7263678336895213e-08, 1.7371966087103238e-09, 2.526425490682771e-08, 1.8753606434763136e-08, 9.741777055258173e-09, 6.207931494745179e-09, 6.622031548162916e-09, 4.7912484981392675e-09, 6.415335553303522e-09, 1.1521505824052205e-08, 7.714604420884611e-09};
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
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();  ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    typedef ggml_backend_buffer_type_t * (*extra_t)(ggml_backend_dev_t);
    extra_t extra = (extra_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    ggml_backend_buffer_type_t buft = NULL;
    for (ggml_backend_buffer_type_t * t = extra(dev); t && *t; ++t)
        if (!strcmp(ggml_backend_buft_name(*t), "CPU_RISCV64_SPACEMIT")) buft = *t;
    struct ggml_init_params wp = { ggml_tensor_overhead(), NULL, true };
    struct ggml_context * wctx = ggml_init(wp);
    struct ggml_tensor * w = ggml_new_tensor_2d(wctx, GGML_TYPE_Q4_1, 32, 16);
    if (!buft || !ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft)) return 2;
    struct ggml_tensor * a = tensor(ctx, GGML_TYPE_Q4_1, 32, 16, A_HEX), * b = tensor(ctx, GGML_TYPE_F32, 32, 1, B_HEX);
    struct ggml_tensor * c = ggml_mul_mat(ctx, w, b);
    int repacked = ggml_backend_dev_supports_op(dev, c);
    if (repacked) ggml_backend_tensor_set(w, a->data, 0, ggml_nbytes(w)); else c = ggml_mul_mat(ctx, a, b);
    printf("weights in %s\n", repacked ? "CPU_RISCV64_SPACEMIT" : "CPU memory (CPU_RISCV64_SPACEMIT does not take them)");
    struct ggml_cgraph * g = ggml_new_graph(ctx);  ggml_build_forward_expand(g, c);
    ggml_backend_t cpu = ggml_backend_cpu_init();  ggml_backend_cpu_set_n_threads(cpu, 1);  ggml_backend_graph_compute(cpu, g);
    int bad = 0;
    for (int i = 0; i < 16; ++i) {
        double got = ((float *) c->data)[i], want = expected[i], tol = bound[i];
        if (!(got == want || fabs(got - want) <= tol || (isnan(got) && isnan(want))) && bad++ < 4)
            printf("C[%d] = %.9g, expected %.9g (bound %.3g)\n", i, got, want, tol);
    }
    printf("VLEN %d: %d of 16 wrong\n", ggml_cpu_get_rvv_vlen() * 8, bad);
    return bad != 0;
}
