// rvvdiff's bare-metal runtime for Spike: the kernel server, unchanged, without an OS.
//
// The kernel server is a static riscv64 Linux program: musl's (zig's clang) or
// glibc's (GCC 14, docs/compilers.md).  Spike has no Linux and, here, no proxy
// kernel, so this file is linked into the same objects to stand in for both:
// the ELF entry point is `rvvdiff_spike_start` (not the libc's `_start`), which
// runs in machine mode, enables the FP and vector units, installs a trap handler
// and enters the libc's `__libc_start_main` with a Linux-like argument block.
// Every `ecall` the libc makes then traps here and is served.  (glibc 2.41's
// static start-up, as qemu-riscv64 -strace shows it, calls riscv_hwprobe, brk,
// set_tid_address, set_robust_list, rseq, prlimit64, readlinkat of
// /proc/self/exe, getrandom and mprotect: all answered below, those it can do
// without with ENOSYS or ENOENT, which glibc takes as "not here".)
//   - read / write / writev on the server's descriptors go to the host through
//     HTIF (Spike's front-end performs Linux-numbered system calls on a block
//     whose address is written to `tohost`), so stdin / stdout / stderr are
//     Spike's own and the kernel server protocol runs unchanged (stdin is
//     buffered: one HTIF call per pipe-full, not per request field);
//   - brk / mmap / munmap are served from the memory after the program
//     (a page allocator; freed pages are reused, so a long-lived server does
//     not run out);
//   - clock_gettime reads the `time` CSR (run Spike with --real-time-clint);
//   - exit writes (code << 1) | 1 to `tohost`;
//   - the environment is the KEY=VALUE words that follow the word rvvdiff-env
//     in the device tree's /chosen/bootargs (Spike's --bootargs: the harness's
//     command keeps the program last; Spike passes no environment of its own);
//   - clone (threads) fails with ENOSYS: Spike runs one hart and the harness
//     sends single-threaded requests only;
//   - everything else the server is not known to need is reported on stderr
//     and fails with ENOSYS, so an unexpected call is visible, not silent.
// Start-up snapshot (for the cost measure, harness/cost/measure/spike_count.py): when the
// first bytes the server reads from stdin are SNAP_MAGIC, the runtime writes the
// program's writable memory (its data and bss, the brk area, the mmap pages in
// use) to stdout as it stands at that first read -- ggml initialised, no request
// read yet -- and exits.  The harness makes from it an ELF file whose segments
// hold that memory and whose entry point, `rvvdiff_spike_resume`, restores the
// registers saved at the read and carries on with it: a run of that file is a
// run of the server that skips its start-up (ggml_cpu_init's tables: 12 million
// instructions, most of a short measurement's time) and is otherwise the same.
//
// A misaligned scalar load or store is performed byte by byte, as Linux does
// for user programs.  Any other trap (illegal instruction, access fault, a
// misaligned vector access) is reported with its cause, pc and faulting value,
// and ends the run with exit status 128 + the signal a Linux kernel would have
// sent, which the harness reads as that signal.
//
// Memory map (Spike's -m0x20000000:0x60000000, see MEM_BASE): the program is
// linked at its start; brk grows up from the end of the program, mmap pages
// come from the top of memory down.  The harness passes the same region to
// Spike (harness/spike.py).
//
// Compiled with -mno-implicit-float and without auto-vectorisation: the trap
// handler must not touch the FP or vector registers of the interrupted code.

#include <stddef.h>
#include <stdint.h>

// The memory Spike is given (-m<base>:<size>), where the program is linked.  Below
// 2 GiB, because ggml and the server are compiled for the "medlow" code model
// (absolute addresses within +-2 GiB of 0), Linux's default; 0x20000000 is above
// Spike's devices (CLINT, PLIC, UART end below 0x10001000).
#define MEM_BASE 0x20000000ull
#define MEM_END 0x80000000ull
#define PAGE 4096ull
#define STACK_BYTES 16777216  /* a literal: also used in the entry code */
#define STR_(x) #x
#define STR(x) STR_(x)
#define BRK_BYTES (256ull << 20)

// Linux errno values and riscv64 system call numbers used below.
#define E_NOENT 2
#define E_BADF 9
#define E_NOMEM 12
#define E_INVAL 22
#define E_NOTTY 25
#define E_NOSYS 38

enum {
    SYS_getcwd = 17, SYS_dup = 23, SYS_dup3 = 24, SYS_fcntl = 25, SYS_ioctl = 29, SYS_faccessat = 48,
    SYS_openat = 56, SYS_ppoll = 73, SYS_close = 57, SYS_lseek = 62, SYS_read = 63, SYS_write = 64, SYS_readv = 65,
    SYS_writev = 66, SYS_readlinkat = 78, SYS_newfstatat = 79, SYS_fstat = 80, SYS_exit = 93,
    SYS_exit_group = 94, SYS_set_tid_address = 96, SYS_futex = 98, SYS_set_robust_list = 99,
    SYS_nanosleep = 101, SYS_clock_gettime = 113, SYS_clock_getres = 114, SYS_clock_nanosleep = 115,
    SYS_sched_getaffinity = 123, SYS_sched_yield = 124, SYS_kill = 129, SYS_tkill = 130, SYS_tgkill = 131,
    SYS_sigaltstack = 132, SYS_rt_sigaction = 134, SYS_rt_sigprocmask = 135, SYS_uname = 160,
    SYS_getrlimit = 163, SYS_getrusage = 165, SYS_prctl = 167, SYS_getpid = 172, SYS_getppid = 173,
    SYS_getuid = 174, SYS_geteuid = 175, SYS_getgid = 176, SYS_getegid = 177, SYS_gettid = 178,
    SYS_sysinfo = 179, SYS_brk = 214, SYS_munmap = 215, SYS_mremap = 216, SYS_clone = 220, SYS_mmap = 222,
    SYS_mprotect = 226, SYS_madvise = 233, SYS_membarrier = 283, SYS_prlimit64 = 261, SYS_getrandom = 278,
    SYS_riscv_hwprobe = 258, SYS_rseq = 293, SYS_clone3 = 435, SYS_getcpu = 168,
};

// The kernel server asks this (harness/server/core.cpp) before starting threads.
const int rvvdiff_spike_harts = 1;

// ------------------------------------------------------------------ HTIF

volatile uint64_t tohost __attribute__((section(".tohost"), aligned(64)));
volatile uint64_t fromhost __attribute__((section(".tohost"), aligned(64)));

static int online_cpus;  // SPIKE_ONLINE_CPUS (below, with the environment)

// Asks Spike's front-end to perform Linux system call `n` on host memory
// addresses (the program runs without translation, so they are physical).
static long htif_syscall5(long n, long a0, long a1, long a2, long a3, long a4) {
    static volatile uint64_t block[8] __attribute__((aligned(64)));
    block[0] = (uint64_t)n;
    block[1] = (uint64_t)a0;
    block[2] = (uint64_t)a1;
    block[3] = (uint64_t)a2;
    block[4] = (uint64_t)a3;
    block[5] = (uint64_t)a4;
    block[6] = block[7] = 0;
    __asm__ volatile("fence" ::: "memory");
    tohost = (uint64_t)(uintptr_t)block;
    while (fromhost == 0) {
    }
    fromhost = 0;
    __asm__ volatile("fence" ::: "memory");
    return (long)block[0];
}

static long htif_syscall(long n, long a0, long a1, long a2) { return htif_syscall5(n, a0, a1, a2, 0, 0); }

static __attribute__((noreturn)) void htif_exit(long code) {
    for (;;) tohost = ((uint64_t)code << 1) | 1;
}

// The server's descriptors, each naming a descriptor of Spike's front-end
// (its 0 and 1 are Spike's stdin and stdout; its 2 is Spike's stdout too, so
// stderr is opened as /dev/stderr at start-up); -1 is closed.  dup / dup3 /
// close only rearrange this table.
#define N_FD 16
static int fd_host[N_FD] = {0, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};

static size_t slen(const char * s) {
    size_t n = 0;
    while (s[n]) ++n;
    return n;
}

static void say(const char * s) { htif_syscall(SYS_write, fd_host[2], (long)s, (long)slen(s)); }

static void say_hex(uint64_t v) {
    char b[19];
    b[0] = '0';
    b[1] = 'x';
    for (int i = 0; i < 16; ++i) b[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 15];
    b[18] = 0;
    say(b);
}

static void say_dec(uint64_t v) {
    char b[21];
    int i = 20;
    b[i] = 0;
    do {
        b[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    say(b + i);
}

// ------------------------------------------------------------------ descriptors

static void open_stderr(void) {
    static const char path[] = "/dev/stderr";
    // The front-end's openat takes the path's length (with its NUL) after the path.
    const long h = htif_syscall5(SYS_openat, -100 /* AT_FDCWD */, (long)path, (long)sizeof path,
                                 1 | 02000 /* O_WRONLY | O_APPEND */, 0);
    if (h >= 0) fd_host[2] = (int)h;
}

static int host_fd(long fd) { return fd >= 0 && fd < N_FD ? fd_host[fd] : -1; }

// Spike's stdin through a buffer: the server reads a request field by field, and each HTIF call
// costs a round trip through Spike's front-end; one host read returns whatever the pipe holds.
static unsigned char stdin_buf[1 << 16];
static uint64_t stdin_pos, stdin_len;

static int stdin_started;
static void snapshot_point(void);

static long stdin_read(unsigned char * dst, uint64_t n) {
    if (!stdin_started) {
        stdin_started = 1;
        snapshot_point();
    }
    if (stdin_pos == stdin_len) {
        const long r = htif_syscall(SYS_read, 0, (long)stdin_buf, (long)sizeof stdin_buf);
        if (r <= 0) return r;
        stdin_pos = 0;
        stdin_len = (uint64_t)r;
    }
    const uint64_t k = n < stdin_len - stdin_pos ? n : stdin_len - stdin_pos;
    for (uint64_t i = 0; i < k; ++i) dst[i] = stdin_buf[stdin_pos + i];
    stdin_pos += k;
    return (long)k;
}

// ------------------------------------------------------------------ memory

extern char _end[];
static uint64_t brk_base, brk_cur;

// mmap area: [mmap_lo, MEM_END), one byte per page (0 free, 1 used); every
// mapping is handed out zeroed, as Linux's anonymous mappings are (musl's calloc
// relies on it).
#define N_PAGES ((MEM_END - MEM_BASE) / PAGE)
static unsigned char page_used[N_PAGES];
static uint64_t mmap_lo;

static void zero(void * p, uint64_t n) {
    uint64_t * q = (uint64_t *)p;
    for (uint64_t i = 0; i < n / 8; ++i) q[i] = 0;
}

static long do_mmap(uint64_t len) {
    const uint64_t n = (len + PAGE - 1) / PAGE;
    const uint64_t first = (mmap_lo - MEM_BASE) / PAGE, last = N_PAGES;
    // Highest free run first: the area grows down from the top of memory.
    uint64_t run = 0;
    for (uint64_t i = last; i-- > first;) {
        run = page_used[i] ? 0 : run + 1;
        if (run == n) {
            for (uint64_t j = i; j < i + n; ++j) page_used[j] = 1;
            const uint64_t addr = MEM_BASE + i * PAGE;
            zero((void *)addr, n * PAGE);
            return (long)addr;
        }
    }
    return -E_NOMEM;
}

static long do_munmap(uint64_t addr, uint64_t len) {
    if (addr % PAGE || addr < mmap_lo || addr >= MEM_END) return -E_INVAL;
    const uint64_t n = (len + PAGE - 1) / PAGE;
    for (uint64_t i = (addr - MEM_BASE) / PAGE, j = 0; j < n && i < N_PAGES; ++i, ++j) page_used[i] = 0;
    return 0;
}

static long do_brk(uint64_t want) {
    if (want >= brk_base && want <= brk_base + BRK_BYTES) {
        if (want > brk_cur) zero((void *)brk_cur, want - brk_cur);
        brk_cur = want;
    }
    return (long)brk_cur;
}

// ------------------------------------------------------------------ start-up snapshot

#define SNAP_MAGIC "rvvdiff-snapshot"
#define SNAP_MAGIC_LEN 16

// Callee-saved state at the snapshot: ra sp gp tp s0-s11 fs0-fs11 fcsr (rvvdiff_snap_save below).
uint64_t rvvdiff_snap_ctx[29];
extern long rvvdiff_snap_save(uint64_t * ctx);
extern __attribute__((noreturn)) void rvvdiff_snap_restore(uint64_t * ctx);
static int snap_stderr_host = -1;  // the host descriptor stderr had when the snapshot was taken

static void snap_write(const void * p, uint64_t n) {
    const unsigned char * b = (const unsigned char *)p;
    while (n) {
        const long r = htif_syscall(SYS_write, 1, (long)b, (long)(n > (1u << 20) ? (1u << 20) : n));
        if (r <= 0) htif_exit(70);
        b += r;
        n -= (uint64_t)r;
    }
}

static void snap_range(uint64_t a, uint64_t e) {
    if (e <= a) return;
    const uint64_t h[2] = {a, e - a};
    snap_write(h, sizeof h);
    snap_write((const void *)(uintptr_t)a, e - a);
}

extern const unsigned char __ehdr_start[];

static void snapshot_take(void) {
    snap_write("RVVSNAP1", 8);
    // The writable segments, but for the HTIF words (the host's mailbox, not program state).
    const uint64_t t0 = (uint64_t)(uintptr_t)&tohost, t1 = (uint64_t)(uintptr_t)&fromhost + 8;
    const unsigned char * eh = __ehdr_start;
    const uint64_t phoff = *(const uint64_t *)(eh + 32);
    const uint16_t phentsize = *(const uint16_t *)(eh + 54), phnum = *(const uint16_t *)(eh + 56);
    for (uint16_t i = 0; i < phnum; ++i) {
        const unsigned char * ph = eh + phoff + (uint64_t)i * phentsize;
        const uint32_t type = *(const uint32_t *)ph, flags = *(const uint32_t *)(ph + 4);
        const uint64_t va = *(const uint64_t *)(ph + 16), memsz = *(const uint64_t *)(ph + 40);
        if (type != 1 || !(flags & 2)) continue;
        const uint64_t end = va + memsz;
        if (t0 >= va && t1 <= end) {
            snap_range(va, t0);
            snap_range(t1, end);
        } else {
            snap_range(va, end);
        }
    }
    snap_range(brk_base, brk_cur);
    for (uint64_t i = (mmap_lo - MEM_BASE) / PAGE; i < N_PAGES;) {
        if (!page_used[i]) {
            ++i;
            continue;
        }
        uint64_t j = i;
        while (j < N_PAGES && page_used[j]) ++j;
        snap_range(MEM_BASE + i * PAGE, MEM_BASE + j * PAGE);
        i = j;
    }
    const uint64_t done[2] = {0, 0};
    snap_write(done, sizeof done);
    htif_exit(0);
}

// At the server's first read of stdin: fill the buffer; if it begins with the magic, this is the
// snapshot run (the buffer is emptied again, so that a resumed run reads its own requests).
static void snapshot_point(void) {
    const long r = htif_syscall(SYS_read, 0, (long)stdin_buf, (long)sizeof stdin_buf);
    if (r <= 0) return;
    stdin_pos = 0;
    stdin_len = (uint64_t)r;
    if (r < SNAP_MAGIC_LEN) return;
    for (int i = 0; i < SNAP_MAGIC_LEN; ++i)
        if (stdin_buf[i] != (unsigned char)SNAP_MAGIC[i]) return;
    stdin_pos = stdin_len = 0;
    snap_stderr_host = fd_host[2];
    if (rvvdiff_snap_save(rvvdiff_snap_ctx) == 0) snapshot_take();
    // Resumed (rvvdiff_spike_resume): the caller goes on to read this run's own requests.
}

// The resumed run's C entry: Spike's front-end is a new one, so stderr is opened again (and every
// descriptor that named the old one renamed), then back into snapshot_point with its registers.
void rvvdiff_spike_resume_main(void) {
    open_stderr();
    for (int fd = 0; fd < N_FD; ++fd)
        if (fd_host[fd] == snap_stderr_host && fd_host[fd] != 1) fd_host[fd] = fd_host[2];
    rvvdiff_snap_restore(rvvdiff_snap_ctx);
}

// ------------------------------------------------------------------ system calls

struct kernel_timespec {
    int64_t sec;
    int64_t nsec;
};
struct iov {
    const char * base;
    uint64_t len;
};

static uint64_t time_ticks(void) {
    uint64_t t;
    __asm__ volatile("csrr %0, time" : "=r"(t));
    return t;
}

// Spike's CLINT counts at 10 MHz (--real-time-clint: in real time).
#define TICKS_PER_SEC 10000000ull

// The return address and stack of the code that made the current system call.
static uint64_t caller_ra, caller_sp;
extern char __executable_start[], etext[];

// Code addresses found in the top of a stack: a crude backtrace for a crash
// report (resolve them with llvm-symbolizer -e <server>).
static void say_stack_code(uint64_t sp) {
    say("  code addresses on the stack:");
    const uint64_t * p = (const uint64_t *)sp;
    for (int i = 0, n = 0; i < 512 && n < 12 && (uint64_t)(p + i) < MEM_END; ++i) {
        if (p[i] >= (uint64_t)(uintptr_t)__executable_start && p[i] < (uint64_t)(uintptr_t)etext) {
            say(" ");
            say_hex(p[i]);
            ++n;
        }
    }
    say("\n");
}

static __attribute__((noreturn)) void die_signal(int sig, const char * what) {
    say("rvvdiff spike runtime: ");
    say(what);
    say(", signal ");
    say_dec((uint64_t)sig);
    say(", called from ");
    say_hex(caller_ra);
    say("\n");
    say_stack_code(caller_sp);
    htif_exit(128 + sig);
}

static long syscall_dispatch(long n, long a0, long a1, long a2, long a3) {
    switch (n) {
        case SYS_read: {
            const int h = host_fd(a0);
            if (h < 0) return -E_BADF;
            return h == 0 ? stdin_read((unsigned char *)a1, (uint64_t)a2) : htif_syscall(SYS_read, h, a1, a2);
        }
        case SYS_write: {
            const int h = host_fd(a0);
            return h < 0 ? -E_BADF : htif_syscall(SYS_write, h, a1, a2);
        }
        case SYS_writev: {
            const int h = host_fd(a0);
            if (h < 0) return -E_BADF;
            const struct iov * v = (const struct iov *)a1;
            long total = 0;
            for (long i = 0; i < a2; ++i) {
                if (!v[i].len) continue;
                const long r = htif_syscall(SYS_write, h, (long)v[i].base, (long)v[i].len);
                if (r < 0) return total ? total : r;
                total += r;
                if ((uint64_t)r < v[i].len) break;
            }
            return total;
        }
        case SYS_dup:
            for (int fd = 0; fd < N_FD; ++fd) {
                if (fd_host[fd] < 0) {
                    if (host_fd(a0) < 0) return -E_BADF;
                    fd_host[fd] = fd_host[a0];
                    return fd;
                }
            }
            return -E_NOMEM;
        case SYS_dup3:
            if (host_fd(a0) < 0 || a1 < 0 || a1 >= N_FD) return -E_BADF;
            fd_host[a1] = fd_host[a0];
            return a1;
        case SYS_close:
            if (host_fd(a0) < 0) return -E_BADF;
            fd_host[a0] = -1;
            return 0;
        case SYS_fcntl: return host_fd(a0) < 0 ? -E_BADF : 0;
        case SYS_ioctl: return -E_NOTTY;
        case SYS_openat: case SYS_faccessat: case SYS_readlinkat: case SYS_newfstatat: return -E_NOENT;
        case SYS_exit: case SYS_exit_group: htif_exit(a0);
        case SYS_set_tid_address: case SYS_getpid: case SYS_gettid: return 1;
        case SYS_getppid: case SYS_getuid: case SYS_geteuid: case SYS_getgid: case SYS_getegid: return 0;
        case SYS_futex: case SYS_set_robust_list: case SYS_sched_yield: case SYS_rt_sigaction:
        case SYS_rt_sigprocmask: case SYS_sigaltstack: case SYS_mprotect: case SYS_madvise: case SYS_prctl:
            return 0;
        case SYS_kill: case SYS_tkill: die_signal((int)a1, "the server raised a signal (abort?)");
        case SYS_tgkill: die_signal((int)a2, "the server raised a signal (abort?)");
        case SYS_clock_gettime: {
            const uint64_t t = time_ticks();
            struct kernel_timespec * ts = (struct kernel_timespec *)a1;
            ts->sec = (int64_t)(t / TICKS_PER_SEC);
            ts->nsec = (int64_t)(t % TICKS_PER_SEC * (1000000000ull / TICKS_PER_SEC));
            return 0;
        }
        case SYS_clock_getres: {
            struct kernel_timespec * ts = (struct kernel_timespec *)a1;
            if (ts) {
                ts->sec = 0;
                ts->nsec = 1000000000ull / TICKS_PER_SEC;
            }
            return 0;
        }
        case SYS_sched_getaffinity: {
            // The CPUs the program may run on: one hart, or the board's count that SPIKE_ONLINE_CPUS names
            // (target_environment); the server's requests are single-threaded either way.
            if ((uint64_t)a1 < 8) return -E_INVAL;
            unsigned char * m = (unsigned char *)a2;
            for (long i = 0; i < a1; ++i) m[i] = 0;
            for (int i = 0; i < online_cpus && i < 64; ++i) m[i / 8] |= (unsigned char)(1u << (i % 8));
            return 8;
        }
        case SYS_ppoll:
            // pause() is ppoll on nothing without a timeout: no signal will ever come, so wait
            // until the harness kills the emulator (its deadline), as a paused process would.
            if (a1 == 0 && a2 == 0) {
                for (;;) __asm__ volatile("wfi");
            }
            return -E_NOSYS;
        case SYS_brk: return do_brk((uint64_t)a0);
        case SYS_mmap:
            // Anonymous private mappings only (no file is ever opened).  An address hint
            // is ignored, as Linux may; MAP_FIXED (0x10) cannot be honoured.
            return (a3 & 0x10) ? -E_NOMEM : do_mmap((uint64_t)a1);
        case SYS_munmap: return do_munmap((uint64_t)a0, (uint64_t)a1);
        case SYS_mremap: return -E_NOMEM;  // musl then allocates, copies and frees
        case SYS_clone: case SYS_clone3:
            say("rvvdiff spike runtime: the server tried to start a thread; Spike runs one hart without an OS, "
                "so only single-threaded requests can run on it\n");
            return -E_NOSYS;
        case SYS_getcpu: {  // one hart: CPU 0, node 0 (sched_getcpu; SpacemiT's backend asks before each graph)
            if (a0) *(unsigned *)a0 = 0;
            if (a1) *(unsigned *)a1 = 0;
            return 0;
        }
        case SYS_getrandom: case SYS_riscv_hwprobe: case SYS_rseq: case SYS_membarrier: case SYS_prlimit64:
        case SYS_getrlimit:
            return -E_NOSYS;
        default:
            say("rvvdiff spike runtime: unsupported system call ");
            say_dec((uint64_t)n);
            say(" (ENOSYS)\n");
            return -E_NOSYS;
    }
}

// ------------------------------------------------------------------ misaligned scalar accesses

// Linux performs a misaligned scalar load or store (in hardware, or by emulating it in the trap
// handler), and user programs may rely on it; ggml does (q6_K's scales read as a uint64_t).  So
// does this runtime: a scalar load / store that traps as misaligned is done byte by byte here.
// Vector ones are not emulated: whether they work is the hart's choice (the finding's subject).

#define FREGS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31)

#if defined(__riscv_zfh)
#define FMV_H_TO(i) __asm__ volatile("fmv.h.x f" #i ", %0" ::"r"(v))
#define FMV_H_FROM(i) __asm__ volatile("fmv.x.h %0, f" #i : "=r"(v))
#else
#define FMV_H_TO(i) (void)0
#define FMV_H_FROM(i) (void)0
#endif

static void set_freg(unsigned n, uint64_t v, unsigned bytes) {
    switch (n) {
#define X(i)                                                                   \
    case i:                                                                    \
        if (bytes == 8) __asm__ volatile("fmv.d.x f" #i ", %0" ::"r"(v));      \
        else if (bytes == 4) __asm__ volatile("fmv.w.x f" #i ", %0" ::"r"(v)); \
        else FMV_H_TO(i);                                                      \
        break;
        FREGS(X)
#undef X
    }
}

static uint64_t get_freg(unsigned n, unsigned bytes) {
    uint64_t v = 0;
    switch (n) {
#define X(i)                                                                   \
    case i:                                                                    \
        if (bytes == 8) __asm__ volatile("fmv.x.d %0, f" #i : "=r"(v));        \
        else if (bytes == 4) __asm__ volatile("fmv.x.w %0, f" #i : "=r"(v));   \
        else FMV_H_FROM(i);                                                    \
        break;
        FREGS(X)
#undef X
    }
    return v;
}

struct access {
    unsigned len;    // instruction length (2 or 4)
    unsigned bytes;  // access size
    int store, fp, sign;
    unsigned reg;    // rd of a load, rs2 of a store
};

// Decodes the scalar loads and stores of RV64GC (not the vector ones); false for anything else.
static int decode_access(uint32_t insn, struct access * a) {
    a->store = a->fp = a->sign = 0;
    if ((insn & 3) == 3) {
        const uint32_t op = insn & 0x7f, f3 = (insn >> 12) & 7;
        a->len = 4;
        if (op == 0x03 && f3 != 7) {  // lb lh lw ld lbu lhu lwu
            a->bytes = 1u << (f3 & 3);
            a->sign = f3 < 4;
            a->reg = (insn >> 7) & 31;
            return 1;
        }
        if (op == 0x23 && f3 < 4) {  // sb sh sw sd
            a->bytes = 1u << f3;
            a->store = 1;
            a->reg = (insn >> 20) & 31;
            return 1;
        }
        if ((op == 0x07 || op == 0x27) && f3 >= 1 && f3 <= 3) {  // flh flw fld / fsh fsw fsd
            a->bytes = 1u << f3;
            a->fp = 1;
            a->store = op == 0x27;
            a->reg = op == 0x07 ? (insn >> 7) & 31 : (insn >> 20) & 31;
            return 1;
        }
        return 0;
    }
    const uint32_t q = insn & 3, f3 = (insn >> 13) & 7;
    a->len = 2;
    if (q == 0) {  // c.fld c.lw c.ld / c.fsd c.sw c.sd: rd' / rs2' in bits 4:2
        a->reg = 8 + ((insn >> 2) & 7);
        switch (f3) {
            case 1: a->bytes = 8; a->fp = 1; return 1;
            case 2: a->bytes = 4; a->sign = 1; return 1;
            case 3: a->bytes = 8; return 1;
            case 5: a->bytes = 8; a->fp = 1; a->store = 1; return 1;
            case 6: a->bytes = 4; a->store = 1; return 1;
            case 7: a->bytes = 8; a->store = 1; return 1;
        }
        return 0;
    }
    if (q == 2) {  // c.fldsp c.lwsp c.ldsp (rd in 11:7) / c.fsdsp c.swsp c.sdsp (rs2 in 6:2)
        switch (f3) {
            case 1: a->bytes = 8; a->fp = 1; a->reg = (insn >> 7) & 31; return 1;
            case 2: a->bytes = 4; a->sign = 1; a->reg = (insn >> 7) & 31; return 1;
            case 3: a->bytes = 8; a->reg = (insn >> 7) & 31; return 1;
            case 5: a->bytes = 8; a->fp = 1; a->store = 1; a->reg = (insn >> 2) & 31; return 1;
            case 6: a->bytes = 4; a->store = 1; a->reg = (insn >> 2) & 31; return 1;
            case 7: a->bytes = 8; a->store = 1; a->reg = (insn >> 2) & 31; return 1;
        }
    }
    return 0;
}

// Performs the access at `addr`; regs as saved by the trap entry (sp is regs + 256).
static int emulate_misaligned(uint64_t * regs, uint32_t insn, uint64_t addr) {
    struct access a;
    if (!decode_access(insn, &a)) return 0;
    volatile unsigned char * p = (volatile unsigned char *)(uintptr_t)addr;
    if (a.store) {
        const uint64_t v = a.fp ? get_freg(a.reg, a.bytes)
                                : a.reg == 0 ? 0 : a.reg == 2 ? (uint64_t)(uintptr_t)regs + 256 : regs[a.reg];
        for (unsigned i = 0; i < a.bytes; ++i) p[i] = (unsigned char)(v >> (8 * i));
    } else {
        uint64_t v = 0;
        for (unsigned i = 0; i < a.bytes; ++i) v |= (uint64_t)p[i] << (8 * i);
        if (a.sign && a.bytes < 8 && (v >> (8 * a.bytes - 1)) & 1) v |= ~0ull << (8 * a.bytes);
        if (a.fp) {
            set_freg(a.reg, v, a.bytes);
        } else if (a.reg != 0 && a.reg != 2) {
            regs[a.reg] = v;
        } else if (a.reg == 2) {
            return 0;  // a load into sp: not worth the trouble, reported instead
        }
    }
    return (int)a.len;
}

// ------------------------------------------------------------------ traps

// Saved by the entry code: x1..x31 at regs[1..31].
void rvvdiff_spike_trap(uint64_t * regs) {
    uint64_t cause, epc, tval;
    __asm__ volatile("csrr %0, mcause" : "=r"(cause));
    __asm__ volatile("csrr %0, mepc" : "=r"(epc));
    __asm__ volatile("csrr %0, mtval" : "=r"(tval));
    if (cause == 11 || cause == 8) {  // ecall from M / U mode
        caller_ra = regs[1];
        caller_sp = (uint64_t)(uintptr_t)regs + 256;  // the entry code moved sp down by 256
        regs[10] = (uint64_t)syscall_dispatch((long)regs[17], (long)regs[10], (long)regs[11], (long)regs[12],
                                              (long)regs[13]);
        epc += 4;
        __asm__ volatile("csrw mepc, %0" ::"r"(epc));
        return;
    }
    static const struct { uint64_t cause; int sig; const char * what; } causes[] = {
        {0, 7, "instruction address misaligned"}, {1, 11, "instruction access fault"},
        {2, 4, "illegal instruction"},            {3, 5, "breakpoint"},
        {4, 7, "load address misaligned"},       {5, 11, "load access fault"},
        {6, 7, "store address misaligned"},      {7, 11, "store access fault"},
    };
    int sig = 11;
    const char * what = "unexpected trap";
    for (size_t i = 0; i < sizeof causes / sizeof causes[0]; ++i) {
        if (causes[i].cause == cause) {
            sig = causes[i].sig;
            what = causes[i].what;
        }
    }
    if (cause == 4 || cause == 6) {
        const uint16_t * ip16 = (const uint16_t *)(uintptr_t)epc;
        const uint32_t insn16 = (ip16[0] & 3) == 3 ? (uint32_t)ip16[0] | ((uint32_t)ip16[1] << 16) : ip16[0];
        const int len = emulate_misaligned(regs, insn16, tval);
        if (len) {
            epc += (uint64_t)len;
            __asm__ volatile("csrw mepc, %0" ::"r"(epc));
            return;
        }
        // A vector load / store (LOAD-FP / STORE-FP major opcode, width 0 or 5..7) whose element is not
        // aligned to its size.  The RVV specification lets a hart either perform it or raise this
        // exception; Spike raises it, QEMU performs it.  Linux emulates misaligned scalar accesses.
        const uint16_t * ip = (const uint16_t *)(uintptr_t)epc;
        const uint32_t insn = (uint32_t)ip[0] | ((uint32_t)ip[1] << 16);
        const uint32_t opcode = insn & 0x7f, width = (insn >> 12) & 7;
        if ((opcode == 0x07 || opcode == 0x27) && (width == 0 || width >= 5)) {
            what = opcode == 0x07 ? "vector load with a misaligned element address (the RVV specification lets a "
                                    "hart trap here; Spike does, QEMU does not)"
                                  : "vector store with a misaligned element address (the RVV specification lets a "
                                    "hart trap here; Spike does, QEMU does not)";
        } else {
            what = cause == 4 ? "misaligned load this runtime cannot emulate" : "misaligned store this runtime cannot emulate";
        }
    }
    say("rvvdiff spike runtime: ");
    say(what);
    say(" (mcause ");
    say_dec(cause);
    say(") at pc ");
    say_hex(epc);
    say(", mtval ");
    say_hex(tval);
    say("\n");
    htif_exit(128 + sig);
}

// Entry: stack, trap vector, FS and VS on, then C.  The trap entry saves the
// integer registers on the interrupted stack (below the red zone musl never
// uses on riscv64) and restores them after the handler.
__asm__(
    ".section .text.rvvdiff_spike_start,\"ax\",@progbits\n"
    ".globl rvvdiff_spike_start\n"
    "rvvdiff_spike_start:\n"
    ".option push\n"
    ".option norelax\n"
    "  lla gp, __global_pointer$\n"
    ".option pop\n"
    "  lla sp, rvvdiff_spike_stack + " STR(STACK_BYTES) "\n"
    "  lla t0, rvvdiff_spike_trap_entry\n"
    "  csrw mtvec, t0\n"
    "  li t0, (1 << 13) | (1 << 9)\n"  // mstatus.FS = initial, mstatus.VS = initial
    "  csrs mstatus, t0\n"
    "  li t0, 3 << 11\n"  // mstatus.MPP = M: mret returns to machine mode
    "  csrs mstatus, t0\n"
    "  call rvvdiff_spike_main\n"
    "1: j 1b\n"
    ".balign 4\n"
    "rvvdiff_spike_trap_entry:\n"
    "  addi sp, sp, -256\n"
    "  sd x1, 8(sp)\n  sd x3, 24(sp)\n  sd x4, 32(sp)\n  sd x5, 40(sp)\n  sd x6, 48(sp)\n  sd x7, 56(sp)\n"
    "  sd x8, 64(sp)\n  sd x9, 72(sp)\n  sd x10, 80(sp)\n  sd x11, 88(sp)\n  sd x12, 96(sp)\n"
    "  sd x13, 104(sp)\n  sd x14, 112(sp)\n  sd x15, 120(sp)\n  sd x16, 128(sp)\n  sd x17, 136(sp)\n"
    "  sd x18, 144(sp)\n  sd x19, 152(sp)\n  sd x20, 160(sp)\n  sd x21, 168(sp)\n  sd x22, 176(sp)\n"
    "  sd x23, 184(sp)\n  sd x24, 192(sp)\n  sd x25, 200(sp)\n  sd x26, 208(sp)\n  sd x27, 216(sp)\n"
    "  sd x28, 224(sp)\n  sd x29, 232(sp)\n  sd x30, 240(sp)\n  sd x31, 248(sp)\n"
    "  mv a0, sp\n"
    "  call rvvdiff_spike_trap\n"
    "  ld x1, 8(sp)\n  ld x3, 24(sp)\n  ld x4, 32(sp)\n  ld x5, 40(sp)\n  ld x6, 48(sp)\n  ld x7, 56(sp)\n"
    "  ld x8, 64(sp)\n  ld x9, 72(sp)\n  ld x10, 80(sp)\n  ld x11, 88(sp)\n  ld x12, 96(sp)\n"
    "  ld x13, 104(sp)\n  ld x14, 112(sp)\n  ld x15, 120(sp)\n  ld x16, 128(sp)\n  ld x17, 136(sp)\n"
    "  ld x18, 144(sp)\n  ld x19, 152(sp)\n  ld x20, 160(sp)\n  ld x21, 168(sp)\n  ld x22, 176(sp)\n"
    "  ld x23, 184(sp)\n  ld x24, 192(sp)\n  ld x25, 200(sp)\n  ld x26, 208(sp)\n  ld x27, 216(sp)\n"
    "  ld x28, 224(sp)\n  ld x29, 232(sp)\n  ld x30, 240(sp)\n  ld x31, 248(sp)\n"
    "  addi sp, sp, 256\n"
    "  mret\n"
    ".text\n");

// rvvdiff_snap_save(ctx): callee-saved registers, gp, tp and fcsr into ctx; returns 0.
// rvvdiff_snap_restore(ctx): the reverse; returns 1 from the rvvdiff_snap_save that filled ctx.
// rvvdiff_spike_resume: the entry of a snapshot's ELF (the start-up code's machine set-up on a stack
// of its own, then rvvdiff_spike_resume_main).
#define SNAP_REGS(OP, FOP) \
    "  " OP " ra, 0(a0)\n  " OP " sp, 8(a0)\n  " OP " gp, 16(a0)\n  " OP " tp, 24(a0)\n" \
    "  " OP " s0, 32(a0)\n  " OP " s1, 40(a0)\n  " OP " s2, 48(a0)\n  " OP " s3, 56(a0)\n" \
    "  " OP " s4, 64(a0)\n  " OP " s5, 72(a0)\n  " OP " s6, 80(a0)\n  " OP " s7, 88(a0)\n" \
    "  " OP " s8, 96(a0)\n  " OP " s9, 104(a0)\n  " OP " s10, 112(a0)\n  " OP " s11, 120(a0)\n" \
    "  " FOP " fs0, 128(a0)\n  " FOP " fs1, 136(a0)\n  " FOP " fs2, 144(a0)\n  " FOP " fs3, 152(a0)\n" \
    "  " FOP " fs4, 160(a0)\n  " FOP " fs5, 168(a0)\n  " FOP " fs6, 176(a0)\n  " FOP " fs7, 184(a0)\n" \
    "  " FOP " fs8, 192(a0)\n  " FOP " fs9, 200(a0)\n  " FOP " fs10, 208(a0)\n  " FOP " fs11, 216(a0)\n"
__asm__(
    ".text\n"
    ".globl rvvdiff_snap_save\n"
    ".type rvvdiff_snap_save, @function\n"
    "rvvdiff_snap_save:\n" SNAP_REGS("sd", "fsd")
    "  frcsr t0\n  sd t0, 224(a0)\n"
    "  li a0, 0\n  ret\n"
    ".globl rvvdiff_snap_restore\n"
    ".type rvvdiff_snap_restore, @function\n"
    "rvvdiff_snap_restore:\n"
    "  ld t0, 224(a0)\n  fscsr t0\n" SNAP_REGS("ld", "fld")
    "  li a0, 1\n  ret\n"
    ".globl rvvdiff_spike_resume\n"
    ".type rvvdiff_spike_resume, @function\n"
    "rvvdiff_spike_resume:\n"
    ".option push\n"
    ".option norelax\n"
    "  lla gp, __global_pointer$\n"
    ".option pop\n"
    "  lla sp, rvvdiff_spike_resume_stack + 8192\n"
    "  lla t0, rvvdiff_spike_trap_entry\n"
    "  csrw mtvec, t0\n"
    "  li t0, (1 << 13) | (1 << 9)\n"
    "  csrs mstatus, t0\n"
    "  li t0, 3 << 11\n"
    "  csrs mstatus, t0\n"
    "  call rvvdiff_spike_resume_main\n"
    "1: j 1b\n");

unsigned char rvvdiff_spike_stack[STACK_BYTES] __attribute__((aligned(16)));
unsigned char rvvdiff_spike_resume_stack[8192] __attribute__((aligned(16)));

extern int main(int, char **, char **);
// glibc's signature (musl's has no stack_end and ignores a seventh argument): glibc records stack_end
// as the bottom of the main stack (__libc_stack_end), so it is given one, the argument block.
extern int __libc_start_main(int (*)(int, char **, char **), int, char **, void (*)(void), void (*)(void),
                             void (*)(void), void *);

// Linux auxiliary vector keys the libc reads at start-up.
#define AT_NULL 0
#define AT_PHDR 3
#define AT_PHENT 4
#define AT_PHNUM 5
#define AT_PAGESZ 6
#define AT_HWCAP 16
#define AT_RANDOM 25

// The program's environment: Spike's --bootargs, which it writes into the device tree it hands the
// program (a1 at the reset vector) as /chosen/bootargs: the words after "rvvdiff-env", each KEY=VALUE
// (harness/emulators/spike.py's command).  Spike passes no environment of its own; a build that reads
// one (SpacemiT's backend takes its core type from SPACEMIT_CORE_ARCH) gets it this way.  Without that
// word (Spike's default bootargs) the environment is empty.
#define MAX_ENV 32
#define ENV_MARK "rvvdiff-env"
static char bootargs[4096];
// SPIKE_ONLINE_CPUS=N in the environment: the CPUs sched_getaffinity reports (1 to 64; default one, the hart), so a
// program that sizes its work by the CPU count sees the modelled board's (the K1's 8: SpacemiT's backend before
// 2026-05 gives IME work to hardware_concurrency() / 2 cores, none on one CPU).
static int online_cpus = 1;
#define CPUS_KEY "SPIKE_ONLINE_CPUS="

static uint32_t be32(const unsigned char * p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int same(const char * a, const char * b) {
    while (*a && *a == *b) ++a, ++b;
    return *a == *b;
}

static int same_prefix(const char * s, const char * prefix) {
    while (*prefix && *s == *prefix) ++s, ++prefix;
    return !*prefix;
}

// The value of /chosen/bootargs in the flattened device tree at `fdt`, or 0.
static const char * fdt_bootargs(const unsigned char * fdt) {
    if (!fdt || be32(fdt) != 0xd00dfeedu) return 0;
    const unsigned char * p = fdt + be32(fdt + 8);
    const char * strings = (const char *)fdt + be32(fdt + 12);
    for (int depth = 0, chosen = 0;;) {
        const uint32_t tag = be32(p);
        p += 4;
        if (tag == 1) {  // FDT_BEGIN_NODE: its name, padded to 4 bytes
            const char * name = (const char *)p;
            if (++depth == 2 && same(name, "chosen")) chosen = depth;
            p += (slen(name) + 4) & ~(uint64_t)3;
        } else if (tag == 2) {  // FDT_END_NODE
            if (depth-- == chosen) chosen = 0;
        } else if (tag == 3) {  // FDT_PROP: length, name offset, value
            const uint32_t len = be32(p), name = be32(p + 4);
            if (depth == chosen && same(strings + name, "bootargs")) return (const char *)p + 8;
            p += 8 + ((len + 3) & ~3u);
        } else if (tag != 4) {  // FDT_NOP goes on; FDT_END or anything else ends the walk
            return 0;
        }
    }
}

static int target_environment(const unsigned char * fdt, char ** env) {
    const char * args = fdt_bootargs(fdt);
    if (!args) return 0;
    uint64_t n = slen(args);
    if (n >= sizeof bootargs) {
        say("rvvdiff spike runtime: the bootargs do not fit; the environment is empty\n");
        return 0;
    }
    for (uint64_t i = 0; i <= n; ++i) bootargs[i] = args[i] == ' ' ? 0 : args[i];
    int count = 0, marked = 0;
    for (uint64_t i = 0; i < n; i += slen(bootargs + i) + 1) {
        char * word = bootargs + i;
        if (!*word) continue;
        if (!marked) {
            marked = same(word, ENV_MARK);
            continue;
        }
        int has_eq = 0;
        for (const char * c = word; *c && !has_eq; ++c) has_eq = *c == '=';
        if (!has_eq || count == MAX_ENV) {
            say("rvvdiff spike runtime: environment word ignored (not KEY=VALUE, or more than 32): ");
            say(word);
            say("\n");
            continue;
        }
        env[count++] = word;
        if (same_prefix(word, CPUS_KEY)) {
            int n = 0;
            for (const char * c = word + sizeof CPUS_KEY - 1; *c >= '0' && *c <= '9'; ++c) n = n * 10 + (*c - '0');
            online_cpus = n < 1 ? 1 : n > 64 ? 64 : n;
        }
    }
    return count;
}

// Entered from rvvdiff_spike_start with Spike's reset-vector registers: a0 the hart, a1 the device tree.
void rvvdiff_spike_main(uint64_t hart, const unsigned char * fdt) {
    (void)hart;
    open_stderr();
    brk_base = brk_cur = ((uint64_t)(uintptr_t)_end + PAGE - 1) & ~(PAGE - 1);
    mmap_lo = brk_base + BRK_BYTES;
    static unsigned char random_bytes[16] = {0x72, 0x76, 0x76, 0x64, 0x69, 0x66, 0x66, 0x2d,
                                             0x73, 0x70, 0x69, 0x6b, 0x65, 0x00, 0x01, 0x02};
    // The program headers, for the libc's TLS set-up (the ELF header is loaded with the first segment).
    const unsigned char * eh = __ehdr_start;
    const uint64_t phoff = *(const uint64_t *)(eh + 32);
    const uint16_t phentsize = *(const uint16_t *)(eh + 54), phnum = *(const uint16_t *)(eh + 56);
    static char name[] = "rvvdiff-server";
    // ISA letters of AT_HWCAP: I M A F D C V.
    const uint64_t hwcap = (1u << ('i' - 'a')) | (1u << ('m' - 'a')) | (1u << ('a' - 'a')) |
                           (1u << ('f' - 'a')) | (1u << ('d' - 'a')) | (1u << ('c' - 'a')) | (1u << ('v' - 'a'));
    static uint64_t block[32 + MAX_ENV];
    char * env[MAX_ENV];
    const int n_env = target_environment(fdt, env);
    int i = 0;
    block[i++] = (uint64_t)(uintptr_t)name;  // argv[0]
    block[i++] = 0;                          // end of argv
    for (int e = 0; e < n_env; ++e) block[i++] = (uint64_t)(uintptr_t)env[e];
    block[i++] = 0;                          // end of the environment
    block[i++] = AT_PHDR;   block[i++] = (uint64_t)(uintptr_t)(eh + phoff);
    block[i++] = AT_PHENT;  block[i++] = phentsize;
    block[i++] = AT_PHNUM;  block[i++] = phnum;
    block[i++] = AT_PAGESZ; block[i++] = PAGE;
    block[i++] = AT_HWCAP;  block[i++] = hwcap;
    block[i++] = AT_RANDOM; block[i++] = (uint64_t)(uintptr_t)random_bytes;
    block[i++] = AT_NULL;   block[i++] = 0;
    htif_exit(__libc_start_main(main, 1, (char **)block, 0, 0, 0, block));
}
