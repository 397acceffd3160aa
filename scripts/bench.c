// bench.c: `make bench`. Measures, in one run on this machine:
//   1. the machine's fp32 peak: an FMA-throughput probe (our own), 1 thread
//      and all threads;
//   2. a whole training step (forward, backward, clip, AdamW) for the
//      default recipe and a larger shape: median ms per iteration after
//      warm-up, tokens/s, model GFLOP/s and its ratio to the peak;
//   3. a breakdown by op (timers compiled in for this program only);
//   4. sampling speed with the KV cache on one thread.
//
// Model FLOPs per iteration (the count PyTorch/nanoGPT-style MFU uses):
//   6 * P * B*T             P = weights in matrix products = 12 L C^2 + V C
//                           (forward 2 flops per weight per token, backward 4)
// + 12 * L * B * T^2 * C    attention: Q.K^T and P.V, forward 2 * 2 T^2 C per
//                           sequence and layer, backward twice that (the
//                           full T x T, as is customary, though the causal
//                           half is skipped)
// For the default recipe that is 3.96 GFLOP, for the larger shape 145.3.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/gpt.h"
#include "../model/kv_cache.h"
#include "../model/profile.h"
#include "../base/util.h"
#include "../lib/sampler.h"
#include "../train/adamw.h"

// ---- the machine's fp32 FMA throughput

// GCC/clang vector extensions: 16 floats, lowered to whatever the target
// has (one AVX-512 register, two AVX2 registers, four SSE registers).
typedef float vec16 __attribute__((vector_size(64)));

// 12 independent accumulators hide the FMA latency (4 cycles, 2 per cycle).
static double fma_probe_gflops(int threads) {
    const long iters = 20000000;
    double best = 0.0;
    for (int rep = 0; rep < 3; rep++) {
        double start = now_seconds();
        float sink = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        {
            vec16 acc[12];
            vec16 a, b;
            for (int j = 0; j < 16; j++) {
                a[j] = 0.999999f;
                b[j] = 1e-7f * (float)(omp_get_thread_num() + 1);
            }
            for (int i = 0; i < 12; i++) acc[i] = b * (float)(i + 1);
            for (long it = 0; it < iters; it++)
                for (int i = 0; i < 12; i++) acc[i] = acc[i] * a + b;
            for (int i = 0; i < 12; i++)
                for (int j = 0; j < 16; j++) sink += acc[i][j];
        }
        double seconds = now_seconds() - start;
        if (sink == 12345.0f) printf(" "); // keep the loop alive
        double gflops = 2.0 * 16 * 12 * iters * threads / seconds / 1e9;
        if (gflops > best) best = gflops;
    }
    return best;
}

// ---- a training step

typedef struct {
    const char *name;
    int layers, heads, dim, context, batch, iters;
} Shape;

static double model_flops(const GPTConfig *c, int B, int T) {
    double P = 12.0 * c->layers * c->dim * c->dim + (double)c->vocab_size * c->dim;
    return 6.0 * P * B * T + 12.0 * c->layers * B * (double)T * T * c->dim;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bench_training(const Shape *shape, double peak_gflops) {
    GPTConfig cfg = {65, shape->context, shape->layers, shape->heads, shape->dim};
    int B = shape->batch, T = shape->context;
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 1);
    gpt_alloc_training(&model, B, T);
    AdamW opt;
    adamw_init(&opt, model.num_params);
    AdamWConfig acfg = {1e-3f, 1e-4f, 100, 2000, 0.9f, 0.99f, 1e-8f, 0.1f, 1.0f};
    int *inputs = xmalloc(sizeof(int) * B * T), *targets = xmalloc(sizeof(int) * B * T);
    Rng rng;
    rng_seed(&rng, 7);
    for (int i = 0; i < B * T; i++) {
        inputs[i] = (int)rng_below(&rng, cfg.vocab_size);
        targets[i] = (int)rng_below(&rng, cfg.vocab_size);
    }
    int warmup = 3, n = shape->iters;
    double *ms = xcalloc(n, sizeof(double));
    double optimizer_seconds = 0.0;
    for (int it = -warmup; it < n; it++) {
        if (it == 0) memset(op_seconds, 0, sizeof op_seconds);
        double start = now_seconds();
        gpt_forward(&model, inputs, targets, B, T);
        gpt_zero_grad(&model);
        gpt_backward(&model, inputs);
        double opt_start = now_seconds();
        float norm = grad_global_norm(model.grads_memory, model.num_params);
        adamw_update(&opt, &model, &acfg, 1e-4f, norm > 1.0f ? 1.0f / norm : 1.0f);
        double end = now_seconds();
        if (it >= 0) {
            ms[it] = 1e3 * (end - start);
            optimizer_seconds += end - opt_start;
        }
    }
    double total_ms = 0.0;
    for (int i = 0; i < n; i++) total_ms += ms[i];
    qsort(ms, n, sizeof(double), compare_doubles);
    double median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    double flops = model_flops(&cfg, B, T);
    double gflops = flops / (median * 1e-3) / 1e9;
    printf("\n%s: %d layers, %d heads, dim %d, context %d, batch %d (%zu parameters)\n",
           shape->name, cfg.layers, cfg.heads, cfg.dim, cfg.context, B, model.num_params);
    printf("  %-28s %10.1f ms/iter (median of %d, after %d warm-up)\n", "training step", median, n,
           warmup);
    printf("  %-28s %10.0f tokens/s\n", "throughput", B * T / (median * 1e-3));
    printf("  %-28s %10.2f GFLOP per iteration\n", "model arithmetic", flops / 1e9);
    printf("  %-28s %10.1f GFLOP/s = %.0f%% of the measured peak %.0f GFLOP/s\n", "model speed",
           gflops, 100.0 * gflops / peak_gflops, peak_gflops);
    printf("  breakdown (mean per iteration):\n");
    double accounted = 0.0;
    for (int op = 0; op < NUM_PROFILED_OPS; op++) {
        double op_ms = 1e3 * op_seconds[op] / n;
        accounted += op_ms;
        printf("    %-26s %8.2f ms  %5.1f%%\n", op_names[op], op_ms, 100.0 * op_ms / (total_ms / n));
    }
    double opt_ms = 1e3 * optimizer_seconds / n;
    accounted += opt_ms;
    printf("    %-26s %8.2f ms  %5.1f%%\n", "optimizer (norm + AdamW)", opt_ms,
           100.0 * opt_ms / (total_ms / n));
    printf("    %-26s %8.2f ms  %5.1f%%\n", "other (zeroing, copies)", total_ms / n - accounted,
           100.0 * (total_ms / n - accounted) / (total_ms / n));
    free(ms);
    free(inputs);
    free(targets);
    adamw_free(&opt);
    gpt_free(&model);
}

// ---- sampling with the KV cache, one thread

static void bench_sampling(void) {
    omp_set_num_threads(1);
    GPTConfig cfg = {65, 64, 4, 4, 128};
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 1);
    KVCache cache;
    kv_cache_init(&cache, &model);
    Sampler sampler;
    sampler_init(&sampler, cfg.vocab_size, 0.8f, 0, 1.0f, 1);
    int n = 20000;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        kv_cache_reset(&cache);
        double start = now_seconds();
        const float *logits = kv_cache_step(&cache, 0);
        for (int i = 0; i < n; i++) logits = kv_cache_step(&cache, sampler_sample(&sampler, logits));
        double seconds = now_seconds() - start;
        if (seconds < best) best = seconds;
    }
    printf("\nsampling, default shape, 1 thread, KV cache: %.0f tokens/s (best of 3 x %d tokens)\n",
           n / best, n);
    sampler_free(&sampler);
    kv_cache_free(&cache);
    gpt_free(&model);
}

int main(int argc, char **argv) {
    int threads = omp_get_num_procs();
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    printf("bench: %d threads%s\n", threads, quick ? " (quick)" : "");
    double peak1 = fma_probe_gflops(1), peak = fma_probe_gflops(threads);
    printf("fp32 FMA peak (our probe): %.0f GFLOP/s on 1 thread, %.0f on %d\n", peak1, peak,
           threads);
    omp_set_num_threads(threads);
    Shape shapes[] = {{"default recipe", 4, 4, 128, 64, 12, quick ? 5 : 50},
                      {"larger shape", 6, 6, 384, 256, 8, quick ? 2 : 7}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) bench_training(&shapes[i], peak);
    bench_sampling();
    return 0;
}
