// ggml_gemv_q4_0_8x8_q8_0 / ggml_gemm_q4_0_8x8_q8_0: mul_mat of 16 Q4_0 rows in the CPU_REPACK buffer and 5 F32 rows, k = 64. ggml's public API only; exit status 1 while the result is wrong.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
static const char * A_HEX =
    "003cf8360fffa0cadc5bd9a8a8645266bb8f003c6800c34779ff6c4438db3e973bc3b7ae003c28852f6ca6c0829747d52fb7 "
    "1c924543003c880cec2458a17e9f952808fcc128ad89003c5872fbfb4ff436c250a0a7d26bf3ea08003cc8b18aa512917e09 "
    "0064baa42c244a61003c98d0c501431386f6c0c7ce5ef2252a60003ce875f71da7a68a912e0e90c9efc172e1003c185af8cb "
    "6d12ac20e741738f768acf7f003c98966c49876fd4f77fad399028163f08003c68132e127a4fd19054c53740214a61d0003c "
    "287b5d825b7c758dec3262cae643ffe3003c88d89b0413d247d72be627a97b275270003cf81731fa0fb687daee5342f59fc8 "
    "01f6003c9863caf7eb6694491ed46a716247b04a003c286f2b5f8dfaff24a29b6a038f15df38003c484f778b764dbb60968a "
    "c7272746f86b003c7827d48cc09a80286cbd3183a261f0e6003c688d5ce3b302d12e86b2346ce54519f5003c78a45ecbbbef "
    "a1ec69eba91b4b6cb574003c984edf86a35464e099341a8cd4c009e2003c481def52e04cbfba9d56ae105152d45b003c687b "
    "27d52d2b54681f8e3d6b2996a277003c58f69dfac00559d9c0ebd1e20ab53aaf003c982b6ed9464cb3a86f53cb315f2e491c "
    "003c88711931106192dd6b68f58268e8a838003c18ab52f7a8bc96d539e8684563fd2e6e003c6837f202bfcd6bf5f03b3d23 "
    "11553416003c888a3d052418988e68dd616e060ef139003c488cfd720893c9d4b5397e7db0131e89003ce8ccd7ef03f71e54 "
    "43491a154d613ac8003c98d3dfcdee3bd8430cfa9e5d6e4eb0b2 ";
static const char * B_HEX =
    "0000fec2 00*3 40 00*3 420000644200006cc2000034c20000244200006442 00*3 "
    "c20000c0c100003c42000020c10000e8c1000028420000f8c1000040c1000090410000c040000054c2000070c200003842 "
    "00*3 "
    "4200002c420000a040000020420000b0c10000c0c000001442000040c20000c8c1000040c20000c0c00000fec2000038c200 "
    "0070c1000040c100004c42000018c2 00*6 f0c1000074c2 00*3 42000060c20000e0c1 00*7 c0000044c200007442 "
    "00*3 "
    "4200006c42000050c20000e8410000d0c10000a040000058420000e0c10000e84100002cc20000b8c100007042000020c1 "
    "00*3 "
    "400000d0c1000044c20000fec2000080410000c0c000000c42000088c10000604100000c4200005442000010c1000068c200 "
    "00e0410000804000003c420000a0c0000088c1000060c20000a0c0000090410000084200003442000010c20000404100001c "
    "420000f0c10000a0c100002c42000020410000803f0000b0410000803f00007442 00*3 "
    "420000fec2000034c20000c0400000244200005cc20000b841000004420000104200003c4200001cc20000e0400000184200 "
    "0090c100001cc2000040c0000054c2000010c2000034420000a8410000384200002c42000040420000c0c1000080c0000070 "
    "410000e8c10000544200007cc200002c42000098410000f8c10000e0410000fec200002c4200007c420000e0c1000080c000 "
    "0010c20000c041000090410000304200001c420000744200006c4200004842000030c2000068c2 00*3 "
    "c00000a0c10000484200001842000020c1000020410000304100004842000070c2000080bf0000b0410000c0c00000544200 "
    "006442000028420000a0c0000044420000fec20000a0410000e8c1 00*3 "
    "c20000b8410000084200004442000014c200003c42000028420000c0c1000060c200000c42000024420000a0c000002cc200 "
    "0034c2000080c1000004420000b8c100006cc20000c0410000f841000024c2 00*3 41000050c1 00*6 "
    "7cc2000088410000f0c10000e040000020c10000fec2000048c2000088c10000884100000842000070c1000070c20000e841 "
    "0000803f0000a04100002cc2000010c10000444200003c420000b8c100008841000054c200001c420000e8c10000a0c10000 "
    "6c420000c0400000404200001cc20000044200007c42000058c2000004c2000034c20000f8c10000c0c1000058c20000fec2 "
    "0000f8c10000544200000442000028c20000c84100000c4200003cc200003cc2000080c100005cc2000020c1000040c00000 "
    "a841000010410000c0c0000010c2000030410000c0c000002c420000c8410000e84100001041000088c10000e0c10000e0c0 "
    "00001041000088c1000034c2000048c2000068c2000018c20000fec20000d8c1000024c20000c0c10000d8410000c0c10000 "
    "544200002041000038c2000070420000404200000c4200002cc2000014420000c841000004420000d841000040410000a0c1 "
    "00005442000074420000c041000090c1 00*7 41000058c2000050c2000080bf 00*3 "
    "41000010c20000f0c100003cc20000fec20000803f0000e8c100001042000068420000d0c100004c42000008420000144200 "
    "00404000005042000034c2000050c200006c42000080bf000040c10000e8410000d0c1000088410000304200001c42000040 "
    "c2000070420000f0410000c841000020c200005842000060c100006042000008c2000050c200002c42 ";
static const double expected[80] = {1372.0, 1390.0, -640.0, 409.0, -1159.0, -698.0, 2267.0, -324.0, -1482.0, -665.0, -2493.0, -260.0, 575.0, -565.0, 701.0, -1092.0, -467.0, -1137.0, 1002.0, 452.0, -1320.0, -402.0, -105.0, -402.0, 397.0, 1515.0, -152.0, -252.0, -545.0, -1711.0, -339.0, 1399.0, -236.0, 616.0, -1163.0, 525.0, 253.0, -1527.0, 961.0, 2087.0, -813.0, 1221.0, 2082.0, -1603.0, -1819.0, -279.0, -194.0, 248.0, -539.0, 891.0, 1304.0, -1119.0, 765.0, 23.0, -924.0, 2495.0, -694.0, 1365.0, -2278.0, 1948.0, -243.0, 1084.0, 1773.0, -837.0, -1322.0, -278.0, -1585.0, 290.0, 67.0, -2068.0, 73.0, -451.0, -1615.0, -930.0, 282.0, -778.0, -1949.0, 1155.0, 62.0, 1442.0}, bound[1] = {0};
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
        if (!strcmp(ggml_backend_buft_name(*t), "CPU_REPACK")) buft = *t;
    struct ggml_init_params wp = { ggml_tensor_overhead(), NULL, true };
    struct ggml_context * wctx = ggml_init(wp);
    struct ggml_tensor * w = ggml_new_tensor_2d(wctx, GGML_TYPE_Q4_0, 64, 16);
    if (!buft || !ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft)) return 2;
    struct ggml_tensor * a = tensor(ctx, GGML_TYPE_Q4_0, 64, 16, A_HEX), * b = tensor(ctx, GGML_TYPE_F32, 64, 5, B_HEX);
    struct ggml_tensor * c = ggml_mul_mat(ctx, w, b);
    int repacked = ggml_backend_dev_supports_op(dev, c);
    if (repacked) ggml_backend_tensor_set(w, a->data, 0, ggml_nbytes(w)); else c = ggml_mul_mat(ctx, a, b);
    printf("weights in %s\n", repacked ? "CPU_REPACK" : "CPU memory (CPU_REPACK does not take them)");
    struct ggml_cgraph * g = ggml_new_graph(ctx);  ggml_build_forward_expand(g, c);
    ggml_backend_t cpu = ggml_backend_cpu_init();  ggml_backend_cpu_set_n_threads(cpu, 1);  ggml_backend_graph_compute(cpu, g);
    int bad = 0;
    for (int i = 0; i < 80; ++i) {
        double got = ((float *) c->data)[i], want = expected[i], tol = bound[0];
        if (!(got == want || fabs(got - want) <= tol || (isnan(got) && isnan(want))) && bad++ < 4)
            printf("C[%d] = %.9g, expected %.9g (bound %.3g)\n", i, got, want, tol);
    }
    printf("VLEN %d: %d of 80 wrong\n", ggml_cpu_get_rvv_vlen() * 8, bad);
    return bad != 0;
}
