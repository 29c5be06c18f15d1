/* rvvdiff: which CPU variant a distribution's ggml build (GGML_BACKEND_DL, GGML_CPU_ALL_VARIANTS) gives the
 * CPU it runs on, seen through ggml's public API only.  harness/toolchain/dispatch_build.py builds it beside the
 * variants' libraries (ggml looks for them in the program's directory); harness/jobs/dispatch_runs.py runs it
 * under QEMU once per emulated CPU and judges what it prints.
 *
 *   dispatch_probe scores   the kernel's riscv_hwprobe answer (IMA_EXT_0), then each libggml-cpu-*.so of the
 *                           program's directory dlopen'ed and its own ggml_backend_score() called, as ggml's
 *                           loader does ("scoring NAME" is printed before, so a crash names the library);
 *   dispatch_probe load     ggml_backend_load_all() with ggml's log lines, the CPU device, the loaded library's
 *                           features, then a mul_mat per weight type (F32, F16, Q8_0) on that device, on data
 *                           whose every partial sum is exact in float: "matmul TYPE BAD MAXERR" (BAD elements
 *                           differ from the exact result).
 * Every line is flushed as it is written: what was printed before a SIGILL stays.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "ggml.h"

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void on_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    say("log %d %s", (int)level, text);
}

/* The riscv_hwprobe pair (linux/arch/riscv/include/uapi/asm/hwprobe.h); the syscall's number and key are
 * spelled out so that the program builds with C libraries whose headers predate them. */
struct hwprobe_pair {
    long long key;
    unsigned long long value;
};

static void hwprobe(void) {
    struct hwprobe_pair p = {4 /* RISCV_HWPROBE_KEY_IMA_EXT_0 */, 0};
    long r = syscall(258 /* __NR_riscv_hwprobe */, &p, 1, 0, NULL, 0);
    say("hwprobe %ld 0x%llx\n", r, p.value);
}

static char *program_dir(void) {
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return strcpy(path, ".");
    path[n] = 0;
    char *slash = strrchr(path, '/');
    if (slash) *slash = 0;
    return path;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int is_variant(const struct dirent *e) {
    size_t n = strlen(e->d_name);
    return strncmp(e->d_name, "libggml-cpu-", 12) == 0 && n > 15 && strcmp(e->d_name + n - 3, ".so") == 0;
}

static int scores(void) {
    hwprobe();
    const char *dir = program_dir();
    struct dirent **names;
    int n = scandir(dir, &names, is_variant, by_name);
    for (int i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        say("scoring %s\n", names[i]->d_name);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            say("noload %s %s\n", names[i]->d_name, dlerror());
            continue;
        }
        int (*score)(void) = (int (*)(void))dlsym(h, "ggml_backend_score");
        if (score) say("score %s %d\n", names[i]->d_name, score());
        else say("noscore %s\n", names[i]->d_name);
        dlclose(h);
    }
    say("done\n");
    return 0;
}

/* One mul_mat of a K x M weight of type ``type`` by a K x N F32 activation on ``backend``, against the exact
 * result.  F32 and F16: weights are quarters in [-1, 1], activations halves in [-1, 1] (exact in F16), so every
 * product is a multiple of 1/8 and every partial sum of K = 256 of them, in any order, is exact in float.  Q8_0:
 * integers in [-127, 127] with 127 or -127 in each block of 32, so both quantizations have scale 1 and are exact,
 * and the integer sums stay far below 2^24. */
static void matmul(ggml_backend_t backend, enum ggml_type type) {
    enum { K = 256, M = 16, N = 4 };
    static float w[K * M], x[K * N], y[M * N];
    static unsigned char wq[K * M * 4];
    for (int i = 0; i < K * M; i++)
        w[i] = type == GGML_TYPE_Q8_0 ? (i % 32 == 5 ? 127.0f : (float)((i * 37) % 255 - 127)) : (float)((i * 7) % 9 - 4) / 4;
    for (int i = 0; i < K * N; i++)
        x[i] = type == GGML_TYPE_Q8_0 ? (i % 32 == 9 ? -127.0f : (float)((i * 53) % 255 - 127)) : (float)((i * 3) % 5 - 2) / 2;
    struct ggml_init_params ip = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), NULL, true};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *tw = ggml_new_tensor_2d(ctx, type, K, M);
    struct ggml_tensor *tx = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    struct ggml_tensor *ty = ggml_mul_mat(ctx, tw, tx);
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, ty);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    if (type == GGML_TYPE_F32) ggml_backend_tensor_set(tw, w, 0, ggml_nbytes(tw));
    else if (type == GGML_TYPE_F16) {
        ggml_fp32_to_fp16_row(w, (ggml_fp16_t *)wq, K * M);
        ggml_backend_tensor_set(tw, wq, 0, ggml_nbytes(tw));
    } else {
        ggml_quantize_chunk(type, w, wq, 0, M, K, NULL);
        ggml_backend_tensor_set(tw, wq, 0, ggml_nbytes(tw));
    }
    ggml_backend_tensor_set(tx, x, 0, ggml_nbytes(tx));
    enum ggml_status st = ggml_backend_graph_compute(backend, g);
    ggml_backend_tensor_get(ty, y, 0, ggml_nbytes(ty));
    int bad = 0;
    double worst = 0;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            double ref = 0;
            for (int k = 0; k < K; k++) ref += (double)w[i * K + k] * x[j * K + k];
            double err = fabs(y[j * M + i] - ref);
            bad += err != 0;
            worst = err > worst ? err : worst;
        }
    say("matmul %s %d %g status=%d\n", ggml_type_name(type), bad, worst, (int)st);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

static int load(void) {
    ggml_log_set(on_log, NULL);
    ggml_backend_load_all();
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!dev) {
        say("nocpu\n");
        return 3;
    }
    say("device %s | %s\n", ggml_backend_dev_name(dev), ggml_backend_dev_description(dev));
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_get_features_t features =
        (ggml_backend_get_features_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
    for (struct ggml_backend_feature *f = features ? features(reg) : NULL; f && f->name; f++)
        say("feature %s %s\n", f->name, f->value);
    ggml_backend_t backend = ggml_backend_dev_init(dev, NULL);
    ggml_backend_set_n_threads_t threads =
        (ggml_backend_set_n_threads_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
    if (threads) threads(backend, 1);
    matmul(backend, GGML_TYPE_F32);
    matmul(backend, GGML_TYPE_F16);
    matmul(backend, GGML_TYPE_Q8_0);
    ggml_backend_free(backend);
    say("done\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "scores") == 0) return scores();
    if (argc == 2 && strcmp(argv[1], "load") == 0) return load();
    fprintf(stderr, "usage: %s scores|load\n", argv[0]);
    return 2;
}
