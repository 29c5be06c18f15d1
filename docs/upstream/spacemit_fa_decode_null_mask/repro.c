// forward_flash_attn_ext_f16_one_chunk_vlen1024_vf16: ggml_flash_attn_ext of 1 query over 1 position, DK 64, DV 64, 1 head over 1 K/V head, K f16 / V f16, no mask, scale 0.125, max_bias 0, softcap 0, on 1 thread. ggml's public API only; the call died of SIGSEGV where the test ran: whether this program dies is the verdict.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char * Q_HEX =
    "6cbf003e7f4607bebdf2233fdfd5d63da12109bffd22b93e79e9a63fe673723ffe2734bf55f9a1bfea8e1fbf6e45293d4ecd "
    "14c0ec0a60be037a9fbfe0753bbf8f540bbf18f2a1be3dc1d23e1471853f979e03be46e8ae3f334a2abf21f9b33ed249673f "
    "8589c03df8553ebf32f66bbf0a5beabed57a613e2b3b81bf1f3256bee20b23bedb740a3f9acf5b3e69f3b53e506127bf70b9 "
    "04be9eb2483fc028bf3f0f29a1bf41c8c13fa545ac3f0604483fba66873e7ebaa0be6ca0ba3fbfe9fa3ff99be63f5255a83f "
    "91fab63e2faa9abffaf391bbbe0e283f07e9a4bf704dca3e1817dc3edb2f323f2d9197bf576529bf7174dfbe12bc95bf9ba3 "
    "de3f03e8fdbe ";
static const char * K_HEX =
    "433523b4553e483d113968c0a92a7839043cf1b84a3f48bd4bb97b3b472a0140083211b90bb65dbc1cbd0b39a6382e3d09ba "
    "c23e99b44c3eedb6e2b9fe33203c2731afb85dbd9bbd0538eb3b42b14cbcfc3a1fbdb4b9f83880c02f36a7b8fe2ed8ac7832 "
    "8e3911baaf3dcf39c03aa93c4d3ac13ad72cb5bd52b028bab1bd2334 ";
static const char * V_HEX =
    "8cb81fbc2cbc4b34bd354a3d20a32b3c9c3d9a3cbbc0ea3c6f35c836f13520361c35beb59bbff8ae6eba523c9fb4582dccba "
    "16b8e8a1f1bdd034caaebebcccc01b38c3b43db88fb3443f60aa8b2df3bd973e573b453c1a2a553bef35e838dfb0e5bd1e3c "
    "bdbfaeb38bb22cbce83869b2fdb62938a0b78e3da03597b7c7bf3bbd ";
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
    struct ggml_tensor * q = tensor(ctx, GGML_TYPE_F32, 64, 1, 1, 1, Q_HEX);
    struct ggml_tensor * k = tensor(ctx, GGML_TYPE_F16, 64, 1, 1, 1, K_HEX);
    struct ggml_tensor * v = tensor(ctx, GGML_TYPE_F16, 64, 1, 1, 1, V_HEX);
    struct ggml_tensor * mask = NULL;  // no mask
    struct ggml_tensor * c = ggml_flash_attn_ext(ctx, q, k, v, mask, 0.125f, 0.0f, 0.0f);
    c->data = guarded(ggml_nbytes(c), NULL);
    const int n_out = (int) ggml_nelements(c);
    struct ggml_cgraph * g = ggml_new_graph(ctx);  ggml_build_forward_expand(g, c);
    ggml_backend_t cpu = ggml_backend_cpu_init();  ggml_backend_cpu_set_n_threads(cpu, 1);
    ggml_backend_graph_compute(cpu, g);
    int past = clobbered(c);
    if (past) printf("the op wrote past the end of its result: guard byte %d of 256 changed\n", past - 1);
    for (int i = 0; i < n_out && i < 4; ++i) printf("out[%d] = %.9g\n", i, ggml_get_f32_1d(c, i));
    printf("VLEN %d: ran to the end\n", ggml_cpu_get_rvv_vlen() * 8);
    return past != 0;
}
