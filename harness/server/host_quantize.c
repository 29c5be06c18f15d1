/* rvvdiff-host-quantize: ggml's reference quantizers, built for the host from the tree under test.
 *
 * The weight corpus of the quantized dot tests is made by ggml_quantize_chunk.  Its IQ1 / IQ2
 * quantizers first build grid tables that take minutes under QEMU and a second on the host; the
 * quantizers are scalar reference code in ggml-base, so this program (linked with the tree's
 * ggml-base, compiled by the host's C compiler) makes valid rows of every type at host speed.
 *
 * stdin:  requests until end of input, each: int32 type, int64 nrows, int64 n_per_row, then
 *         nrows*n_per_row float32 (row-major), then n_per_row float32 of importance matrix (ones where
 *         the caller has none).  One process serves many requests, so a type's grid tables (seconds
 *         even on the host) are built once.
 * stdout: per request, the quantized rows, nrows * ggml_row_size(type, n_per_row) bytes.
 * Exit 0 at the end of input; any error: a message on stderr and exit 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ggml.h"

static int read_all(void *p, size_t n) {
    return fread(p, 1, n, stdin) == n;
}

static int serve(int32_t type, int64_t nrows, int64_t n_per_row) {
    if (type < 0 || type >= GGML_TYPE_COUNT || nrows <= 0 || n_per_row <= 0) {
        fprintf(stderr, "rvvdiff-host-quantize: bad request: type %d, %lld rows of %lld\n", type,
                (long long)nrows, (long long)n_per_row);
        return 1;
    }
    size_t n = (size_t)(nrows * n_per_row);
    size_t row = ggml_row_size((enum ggml_type)type, n_per_row);
    float *src = malloc(n * sizeof(float));
    float *imatrix = malloc((size_t)n_per_row * sizeof(float));
    void *dst = malloc(row * (size_t)nrows);
    int rc = 1;
    if (!src || !imatrix || !dst) {
        fprintf(stderr, "rvvdiff-host-quantize: out of memory\n");
    } else if (!read_all(src, n * sizeof(float)) || !read_all(imatrix, (size_t)n_per_row * sizeof(float))) {
        fprintf(stderr, "rvvdiff-host-quantize: short data on stdin\n");
    } else {
        size_t got = ggml_quantize_chunk((enum ggml_type)type, src, dst, 0, nrows, n_per_row, imatrix);
        if (got != row * (size_t)nrows) {
            fprintf(stderr, "rvvdiff-host-quantize: ggml_quantize_chunk wrote %zu bytes, expected %zu\n", got,
                    row * (size_t)nrows);
        } else if (fwrite(dst, 1, got, stdout) != got || fflush(stdout) != 0) {
            fprintf(stderr, "rvvdiff-host-quantize: writing the rows failed\n");
        } else {
            rc = 0;
        }
    }
    free(src);
    free(imatrix);
    free(dst);
    return rc;
}

int main(void) {
    int32_t type;
    int64_t nrows, n_per_row;
    for (;;) {
        size_t got = fread(&type, 1, 4, stdin);
        if (got == 0 && feof(stdin)) {
            return 0;
        }
        if (got != 4 || !read_all(&nrows, 8) || !read_all(&n_per_row, 8)) {
            fprintf(stderr, "rvvdiff-host-quantize: short request header on stdin\n");
            return 1;
        }
        if (serve(type, nrows, n_per_row) != 0) {
            return 1;
        }
    }
}
