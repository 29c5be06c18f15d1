/* Executes single instruction words on a register file given on stdin, under Spike (tests/test_ime_spike.py).
 *
 * Each case on stdin, little-endian: u32 word, u32 unused, u64 AVL, u64 vtype, then the 32 vector registers
 * (32 * VLENB bytes).  The runner loads the registers, sets `vsetvl AVL, vtype`, executes the word (copied
 * into a buffer before a `ret`, so any word can be tried, including ones no assembler emits), and writes the
 * 32 registers afterwards to stdout (32 * VLENB bytes).  A word that traps ends the program with the runtime's report
 * (illegal instruction: exit 132, "mtval" is the word). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static uint32_t code[2];  /* the word under test, then ret */

/* n bytes of stdin (read(2): rvvdiff's Spike runtime serves read, not the readv of stdio); 0 at its end. */
static int read_all(void * buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = read(0, (char *)buf + got, n - got);
        if (r <= 0)
            return 0;
        got += (size_t)r;
    }
    return 1;
}

int main(void) {
    uint64_t vlenb;
    __asm__ volatile("csrr %0, vlenb" : "=r"(vlenb));
    unsigned char * regs = malloc(32 * vlenb);
    struct { uint32_t word, unused; uint64_t avl, vtype; } head;
    while (read_all(&head, sizeof head) && read_all(regs, 32 * vlenb)) {
        code[0] = head.word;
        code[1] = 0x00008067u;  /* jalr x0, 0(ra) */
        __asm__ volatile("fence.i" ::: "memory");
        unsigned char * r8 = regs + 8 * vlenb, * r16 = regs + 16 * vlenb, * r24 = regs + 24 * vlenb;
        __asm__ volatile(
            "vl8r.v v0, (%[r0])\n\tvl8r.v v8, (%[r8])\n\tvl8r.v v16, (%[r16])\n\tvl8r.v v24, (%[r24])\n\t"
            "vsetvl t0, %[avl], %[vtype]\n\t"
            "jalr ra, 0(%[fn])\n\t"
            "vs8r.v v0, (%[r0])\n\tvs8r.v v8, (%[r8])\n\tvs8r.v v16, (%[r16])\n\tvs8r.v v24, (%[r24])\n\t"
            :
            : [r0] "r"(regs), [r8] "r"(r8), [r16] "r"(r16), [r24] "r"(r24), [avl] "r"(head.avl),
              [vtype] "r"(head.vtype), [fn] "r"(code)
            : "ra", "t0", "memory", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11",
              "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25",
              "v26", "v27", "v28", "v29", "v30", "v31");
        for (size_t done = 0; done < 32 * vlenb;) {
            ssize_t w = write(1, regs + done, 32 * vlenb - done);
            if (w <= 0)
                return 3;
            done += (size_t)w;
        }
    }
    return 0;
}
