// bench_products.c: the fp32 products of the recipes' linear layers alone,
// the figure a change to kernels/ moves (docs/benchmarks.md, "How to
// measure"): for each recipe's shape, one block's four linear calls (Q,K,V
// sharing LN1's output, the attention's projection, the MLP's two) and the
// head, forward and backward (d_inp, d_W, d_bias), on the threads asked.
// Prints ms for all of them and GFLOP/s, per shape; the median of `reps`
// timings each. The time is CPU time (the thread's on one thread, the
// process's, every thread's, on several: GFLOP/s a core then), so that the
// other processes of a shared machine, which take a core away for a
// while, count for less (not for nothing: they share its caches); run
// with OMP_WAIT_POLICY=passive, so that a thread waiting at a barrier
// counts only what the wait costs. Built by `make bin/bench_products`; two builds run in turn
// (before and after a change) give the paired ratio.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../kernels/matmul.h"
#include "../base/options.h"
#include "../base/util.h"

typedef struct {
    const char *name;
    int n, dim; // tokens a step (batch x context), channels
} ProductShape;

static const ProductShape shapes[] = {
    {"default 4x128 ctx 64 b 12", 768, 128},  {"minutes 4x128 ctx 128 b 16", 2048, 128},
    {"wider 4x192 ctx 128 b 16", 2048, 192},  {"induction 2x128 ctx 256 b 16", 4096, 128},
    {"larger 6x384 ctx 256 b 8", 2048, 384},
};

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *filled(long count, float scale) {
    float *x = xmalloc(sizeof(float) * count);
    for (long i = 0; i < count; i++) x[i] = scale * (float)((i * 7919 % 1000) - 500) / 500.0f;
    return x;
}

// Seconds of CPU time: the calling thread's on one thread, else the process's.
static double seconds_now(void) {
    struct timespec t;
    clock_gettime(omp_get_max_threads() > 1 ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// One block's linear layers and the head (vocabulary 65), forward then
// backward; returns seconds.
static double block_products(Products *pr, const ProductShape *s, float **buf) {
    int N = s->n, C = s->dim, V = 65;
    float *inp = buf[0], *out = buf[1], *d_out = buf[2], *d_inp = buf[3], *w = buf[4], *d_w = buf[5],
          *bias = buf[6], *d_bias = buf[7];
    double start = seconds_now();
    const float *ws[3] = {w, w + C * C, w + 2 * C * C}, *bs[3] = {bias, bias, bias};
    float *outs[3] = {out, out + (long)N * C, out + 2L * N * C};
    linear_forward_shared_input(pr, outs, inp, ws, bs, 3, N, C, C); // Q, K, V
    linear_forward(pr, out, inp, w, bias, N, C, C);                  // attention's projection
    linear_forward(pr, out, inp, w, bias, N, C, 4 * C);              // MLP up
    linear_forward(pr, out, inp, w, bias, N, 4 * C, C);              // MLP down
    linear_forward(pr, out, inp, w, NULL, N, C, V);                  // head
    linear_backward(pr, d_inp, d_w, NULL, d_out, inp, w, N, C, V);
    linear_backward(pr, d_inp, d_w, d_bias, d_out, inp, w, N, 4 * C, C);
    linear_backward(pr, d_inp, d_w, d_bias, d_out, inp, w, N, C, 4 * C);
    linear_backward(pr, d_inp, d_w, d_bias, d_out, inp, w, N, C, C);
    float *d_ws[3] = {d_w, d_w + C * C, d_w + 2 * C * C}, *d_bs[3] = {d_bias, d_bias, d_bias};
    const float *d_outs[3] = {d_out, d_out + (long)N * C, d_out + 2L * N * C};
    linear_backward_shared_input(pr, d_inp, d_ws, d_bs, d_outs, inp, ws, 3, N, C, C);
    return seconds_now() - start;
}

int main(int argc, char **argv) {
    int threads = 1, reps = 9;
    Option table[] = {
        {"--threads", "N", OPT_INT, &threads, "threads", 1, 256, 0},
        {"--reps", "N", OPT_INT, &reps, "timings a shape (the median is printed)", 1, 999, 0},
    };
    char err[1024];
    int parsed = options_parse(table, 2, argc, argv, err, sizeof err);
    if (parsed == OPTIONS_HELP) {
        options_usage(stdout, "usage: bin/bench_products [--threads N] [--reps N]", table, 2);
        return 0;
    }
    if (!parsed) usage_error("%s", err);
    omp_set_num_threads(threads);
    printf("fp32 products on the %s variant, %d thread(s)\n", matmul_fp32_kernel_name(), threads);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const ProductShape *s = &shapes[i];
        long N = s->n, C = s->dim;
        float *buf[8] = {filled(N * 4 * C, 1), filled(3 * N * 4 * C, 0), filled(3 * N * 4 * C, 0.1f),
                         filled(N * 4 * C, 0), filled(3 * 4 * C * C, 0.05f), filled(3 * 4 * C * C, 0),
                         filled(4 * C, 0.1f), filled(4 * C, 0)};
        Products pr;
        products_init(&pr, PRECISION_FP32, BF16_PORTABLE);
        block_products(&pr, s, buf); // warm-up, and the workspace grown
        double *seconds = xcalloc(reps, sizeof(double));
        for (int r = 0; r < reps; r++) seconds[r] = block_products(&pr, s, buf);
        qsort(seconds, reps, sizeof(double), compare_doubles);
        double median = seconds[reps / 2];
        double flops = 6.0 * N * (12.0 * C * C + 65.0 * C); // forward 2, backward 4 a weight a token
        printf("  %-30s %8.3f ms  %6.1f GFLOP/s a core\n", s->name, 1e3 * median, flops / median / 1e9);
        fflush(stdout);
        free(seconds);
        products_free(&pr);
        for (int b = 0; b < 8; b++) free(buf[b]);
    }
    return 0;
}
