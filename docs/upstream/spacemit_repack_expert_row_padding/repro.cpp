// repack<block_q8_0, 32, 32> (SpacemiT, spacemit/repack.cpp, IME2's q8_0 weights) on q8_0 [32, 17, 2]
// (experts of MUL_MAT_ID, ne1 not a multiple of 32) into the memory SpacemiT's buffer type allocates for it, followed
// by 4096 guard bytes of 0xff: the repack must not write past the allocation. Exit status 1 while it does.
#define GGML_COMMON_DECL_CPP
#include "ggml-common.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "spacemit/ime.h"
#include "spacemit/repack.h"
#include <riscv_vector.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// repack.cpp's explicit specialisation (repack.h declares the template only).
namespace ggml::cpu::riscv64_spacemit {
template <> int repack<block_q8_0, 32, 32>(ggml_tensor *, const void *, size_t);
}
static const char * SRC_HEX =
    "5f82c2d9cfeb0fa321d7d982f8bd1045b8e8cd4ea93d7d0a1df04213b6273b043b51de2c787a32d04e1c40a67959aae97fb2 "
    "ed80717b4c9b459a82f85f49c0babf7fdca1e7012b8bedbf568f07e860ef4c3700474dc7dbd0b090beab6878b300f0f5e664 "
    "bfd87edb1f95e78d7310990879d3cfc307b3cabaa627b9d849c4f72c0e7fdb163a4bf9dc2e79a805d9339d8a3812951420eb "
    "b94cf1d6267bcf3a356c0ca33a673df53f0768ca5e016007d11fa8eb1e02a90aaeabbbe28e863a36aea53166de41f0e0899d "
    "651a99c333b138621af5fe757d2649ff3fc513ce560618fb2d712861f3ad7faf3ec639f3c67f84a6bca51ed7800b3eb0af69 "
    "39b4bc5a9063ba3b0ae03eaf952215043394b975b3b83b6a71d8f19e7d86184e1b60f5026c4f180d476cc1b45f7c43b304b8 "
    "8679b5e392a6ac12d2791def9c2006884c77985bd1a538ac6bc74f92edde2d414c086652a3d631b8f90b2498429421819e59 "
    "8156bc92bac28f244164ea4903541a05e9e3a3ba90430300273abc02d4b65531899fef8a6d0c91078215bc2c8c60b72a28d5 "
    "4fee9d6651467fc960ed0351d950473d041facca424561e06cfc4c149250fe0eaee9d7ab86c40b56b8a4da9213b7782616a4 "
    "2bdcd3704973af4a1ee549e8dbcb6c5591b4285e0b3b88bd5ac49a44510dabb7f19199b59067bc1524ff39c0d132e0724ff2 "
    "72973b171b3b889fcaa99094224221e68959774c1461eee637db07acee0af1e3b2711333e4281cc226532ef114d6700c28dc "
    "775dec81f2a217bd011b87849382583b0da18fae94c333005aedb444ea68a58ebc7030e76579e70a60f433e21c320b2cf97f "
    "70d6c10c7dc8db6cb10e00f20c4fc69e680f805902a5befe43d38f9a01f9edf268542e04ac84c5751d9abfd58184fac1c24a "
    "51680118577f1ef8946b71008187d27ff13a6e4029c94dbfe413c0e2266a55092848881d07bcacbdd1bfab750db669faa9ec "
    "af769bee1028452f9d396c1d835ce22116bca0baa51b67f892a76bedd7d811abc202caf7e3210bdfdacac3039c4e861e5784 "
    "17dd0975151520992ffb43d7ced3f0b90bf55f183e5cf7651526603e5184b233fef86446025e0bd1d2e335cf4262561787d2 "
    "89b7c53a137de07a8e33ac53aaca7c3b501687e4ac0b48cde980c023f9786cec599d91f80f1d2144fe452a6df79af7898b54 "
    "37a8d83f5871f51115269c2657eed1c528b1f3e85e0a175a76d00ec264bbe4f7ea2eab90479d989e6d80dbf342071b0d6aed "
    "7ac91eb8238a6a4fb30818044dfd5d17af1309c2bb223b26db2744838a8211e632c6d9ed71f5964452c8ea10b70ab07eb991 "
    "60d76656e99fae981211439c71a6e2b22458ed34e939c50e286e3e0890df32d84ff7972e1c240f6dee8f3c9cf1c231f34442 "
    "7fe9cc45a875de3d5b91a935e6b85be32e93f7373094d23970091d2034d1e21f04b849c7630bd049044e4ecd42290c965f43 "
    "c0db09e0d88dcd55a0c3953449cfcde99f0f1c5a7b8f251a647403f9d5494c52d3732093b369e24ee87d3e6070d1489953d3 "
    "3eba62a0826cd5b5c51c86f5767e0ca39849915ef1c00315adf2778dfb81413b9e6a0b9884c09406d59c29d9c5c4cef1f8c0 "
    "3d2595e6b3d1 ";
static void unhex(unsigned char * p, const char * h) {  // h: hex bytes, "hh*N" = N bytes hh
    unsigned v;  int n, len;
    while (sscanf(h, " %2x%n", &v, &len) == 1) {
        h += len; n = 1;
        if (*h == '*' && sscanf(h + 1, "%d%n", &n, &len) == 1) h += 1 + len;
        while (n-- > 0) *p++ = (unsigned char) v;
    }
}

int main() {
    ggml_init_params p = {ggml_tensor_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * t = ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 32, 17, 2);
    static unsigned char src[1156];
    unhex(src, SRC_HEX);
    // what SpacemiT's buffer type allocates for the tensor, then 4096 guard bytes of 0xff
    const size_t alloc = ggml_backend_buft_get_alloc_size(ggml_backend_cpu_riscv64_spacemit_buffer_type(), t);
    unsigned char * dst = (unsigned char *) malloc(alloc + 4096);
    memset(dst, 0xff, alloc + 4096);
    t->data = dst;
    const int ret = ggml::cpu::riscv64_spacemit::repack<block_q8_0, 32, 32>(t, src, sizeof(src));
    int past = 0, first = -1;
    for (int i = 0; i < 4096; ++i)
        if (dst[alloc + i] != 0xff && past++ == 0) first = i;
    printf("VLEN %d: repack returned %d; allocation %zu bytes, %d guard bytes after it changed "
           "(expected none; the first at +%d)\n", (int) __riscv_vlenb() * 8, ret, alloc, past, first);
    return past != 0;
}
