// bench.c: `make bench`. Measures, in one run on this machine:
//   1. the machine's fp32 peak: an FMA-throughput probe (our own), 1 thread
//      and all threads, per CPU second (cpu_seconds: the machine's when quiet); and its bf16 peaks: vdpbf16ps (AVX512_BF16) and
//      AMX's tdpbf16ps probes, where the CPU has them;
//   2. every recipe's shape (bench_recipes; alone with --recipes, and
//      `make bench-recipes` on each fp32 variant the CPU runs): ms a step,
//      tokens/s, its fraction of the peak and the products' alone, the
//      breakdown by op adding up to the step, and Muon's update on top;
//   3. a whole training step (forward, backward, clip, AdamW) for the
//      default recipe and a larger shape, in fp32 and in bf16: median ms per
//      iteration after warm-up, tokens/s, model GFLOP/s and its ratio to
//      the peak of that precision;
//   4. a breakdown by op (this program's build instruments the ops' entry
//      points: op_timer below), and what Muon's update of the matrices
//      (--optimizer muon) would add to the step;
//   5. the default recipe on a busy machine: a busy loop pinned to one core
//      while the step runs with all threads, then with one thread;
//   6. sampling speed with the KV cache on one thread.
// With --history FILE, the peaks and each training step's median ms/iter
// and tokens/s are also appended to FILE as CSV rows (`make bench`:
// docs/bench_history.csv; its columns are described in docs/benchmarks.md).
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
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../model/attention.h"
#include "../model/gpt.h"
#include "../model/ops.h"
#include "../kernels/cpu_features.h"
#include "../infer/kv_cache.h"
#include "../kernels/matmul.h"
#include "../kernels/vector.h"
#include "../base/options.h"
#include "../base/util.h"
#include "../infer/sampler.h"
#include "../optim/adamw.h"
#include "../optim/muon.h"
#include "../base/thread_tuner.h"
#include "bench_history.h"

// ---- the breakdown by op
//
// This program's build compiles the ops (model/ops.c, model/attention.c,
// kernels/matmul.c) with -finstrument-functions, so that every entry and
// exit of a function of theirs calls the two hooks below. A call from the
// main thread outside a parallel region to one of the ops listed here is
// timed, unless it runs inside another listed op (linear_forward calls
// linear_forward_shared_input): the model's own code carries no timers.
enum {
    OP_MATMUL_FWD, OP_MATMUL_BWD, OP_ATTN_FWD, OP_ATTN_BWD, OP_LAYERNORM, OP_GELU,
    OP_SOFTMAX_LOSS, OP_ELEMENTWISE, NUM_PROFILED_OPS
};
static const char *const op_names[NUM_PROFILED_OPS] = {
    "matmul forward",      "matmul backward", "attention forward",        "attention backward",
    "layernorm (fwd+bwd)", "gelu (fwd+bwd)",  "softmax + loss (fwd+bwd)", "embedding, residual, zeroing"};
static double op_seconds[NUM_PROFILED_OPS];

typedef struct {
    void *function;
    int op;
} TimedOp;

#define NO_INSTRUMENT __attribute__((no_instrument_function))

NO_INSTRUMENT static int timed_op(void *function) {
    static const TimedOp ops[] = {
        {(void *)linear_forward, OP_MATMUL_FWD},
        {(void *)linear_forward_shared_input, OP_MATMUL_FWD},
        {(void *)linear_backward, OP_MATMUL_BWD},
        {(void *)linear_backward_shared_input, OP_MATMUL_BWD},
        {(void *)attention_forward_fused, OP_ATTN_FWD},
        {(void *)attention_backward_fused, OP_ATTN_BWD},
        {(void *)layernorm_forward, OP_LAYERNORM},
        {(void *)layernorm_backward, OP_LAYERNORM},
        {(void *)gelu_forward, OP_GELU},
        {(void *)gelu_backward, OP_GELU},
        {(void *)crossentropy_forward, OP_SOFTMAX_LOSS},
        {(void *)crossentropy_backward, OP_SOFTMAX_LOSS},
        {(void *)embedding_forward, OP_ELEMENTWISE},
        {(void *)embedding_backward, OP_ELEMENTWISE},
        {(void *)residual_forward, OP_ELEMENTWISE},
        {(void *)zero_floats, OP_ELEMENTWISE},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i].function == function) return ops[i].op;
    return -1;
}

static int timed_depth;      // listed ops entered and not yet left
static double timed_started; // when the outermost began

NO_INSTRUMENT void __cyg_profile_func_enter(void *function, void *call_site);
NO_INSTRUMENT void __cyg_profile_func_exit(void *function, void *call_site);

void __cyg_profile_func_enter(void *function, void *call_site) {
    (void)call_site;
    if (omp_in_parallel() || timed_op(function) < 0) return;
    if (timed_depth++ == 0) timed_started = now_seconds();
}

void __cyg_profile_func_exit(void *function, void *call_site) {
    (void)call_site;
    int op;
    if (omp_in_parallel() || (op = timed_op(function)) < 0) return;
    if (--timed_depth == 0) op_seconds[op] += now_seconds() - timed_started;
}

// CPU time, of the calling thread or of the process (every thread's): on a
// machine shared with other processes, which take a core away for a
// while, a rate per CPU second is what the core does when it is ours. The
// probes count it, so that their peak is the machine's when quiet; the
// recipes' table counts the steps' too (bench_recipes).
static double cpu_seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// ---- the machine's fp32 FMA throughput

// 12 independent accumulators of the widest vector the target has
// (kernels/vector.h's VLEN floats: one zmm under AVX-512, one ymm under
// AVX2) hide the FMA latency (4-5 cycles, 2 a cycle) and stay in
// registers. A width fixed wider than the target's (16 floats, two ymm
// registers under AVX2) would need more accumulators than there are
// registers: they spill, and the probe measures the spills.
// Under GPT_KERNELS=avx2 in a build for AVX-512, the probe runs in ymm
// registers as the products then do (fma_probe8_gflops).
#define FMA_PROBE(name, vtype, width)                                                            \
    static double name(int threads) {                                                            \
        const long iters = 20000000;                                                             \
        double best = 0.0;                                                                       \
        for (int rep = 0; rep < 3; rep++) {                                                      \
            float sink = 0.0f;                                                                   \
            double gflops = 0.0;                                                                 \
            _Pragma("omp parallel num_threads(threads) reduction(+ : sink, gflops)") {           \
                double start = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);                             \
                vtype acc[12];                                                                   \
                vtype a, b;                                                                      \
                for (int j = 0; j < (width); j++) {                                              \
                    a[j] = 0.999999f;                                                            \
                    b[j] = 1e-7f * (float)(omp_get_thread_num() + 1);                            \
                }                                                                                \
                for (int i = 0; i < 12; i++) acc[i] = b * (float)(i + 1);                        \
                for (long it = 0; it < iters; it++)                                              \
                    for (int i = 0; i < 12; i++) acc[i] = acc[i] * a + b;                        \
                for (int i = 0; i < 12; i++)                                                     \
                    for (int j = 0; j < (width); j++) sink += acc[i][j];                         \
                double seconds = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - start;                   \
                gflops += 2.0 * (width) * 12 * iters / seconds / 1e9;                            \
            }                                                                                    \
            if (sink == 12345.0f) printf(" "); /* keep the loop alive */                         \
            if (gflops > best) best = gflops;                                                    \
        }                                                                                        \
        return best;                                                                             \
    }
FMA_PROBE(fma_probe_native_gflops, vfloat, VLEN)
#if VLEN == 16
typedef float vfloat8 __attribute__((vector_size(8 * sizeof(float))));
FMA_PROBE(fma_probe8_gflops, vfloat8, 8)
#endif

static double fma_probe_gflops(int threads) {
#if VLEN == 16
    if (!cpu_has_avx512f()) return fma_probe8_gflops(threads);
#endif
    return fma_probe_native_gflops(threads);
}

// ---- the machine's bf16 throughput (0 where the CPU lacks the instructions)

#if defined(__x86_64__)
// vdpbf16ps: 16 lanes x 2 multiply-adds, 16 independent accumulators
// (latency 6 cycles; one zmm instruction a cycle on Zen 4), written as one
// asm block: from C, GCC kept an array of accumulators in memory (a store
// and a reload per instruction), and the probe measured those rather than
// the instruction.
// The accumulators start at zero, the inputs are 1.0 and 2^-7 in bf16;
// DOT_ACCUMULATORS must match the DOT lines.
#define DOT_ACCUMULATORS 16
#define DOT_ITERS 10000000L
#define DOT(n) "vdpbf16ps %%zmm17, %%zmm16, %%zmm" #n "\n\t"
#define ZERO(n) "vpxord %%zmm" #n ", %%zmm" #n ", %%zmm" #n "\n\t"
__attribute__((target("avx512f,avx512bf16"))) static double vdpbf16ps_gflops_one_thread(void) {
    long remaining = DOT_ITERS;
    const int ones = 0x3f803f80, small = 0x3c003c00; // bf16 pairs (1.0, 1.0), (2^-7, 2^-7)
    double start = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    __asm__ volatile(ZERO(0) ZERO(1) ZERO(2) ZERO(3) ZERO(4) ZERO(5) ZERO(6) ZERO(7) ZERO(8)
                         ZERO(9) ZERO(10) ZERO(11) ZERO(12) ZERO(13) ZERO(14) ZERO(15)
                     "vpbroadcastd %1, %%zmm16\n\t"
                     "vpbroadcastd %2, %%zmm17\n"
                     "1:\n\t" DOT(0) DOT(1) DOT(2) DOT(3) DOT(4) DOT(5) DOT(6) DOT(7) DOT(8)
                         DOT(9) DOT(10) DOT(11) DOT(12) DOT(13) DOT(14) DOT(15)
                     "dec %0\n\t"
                     "jnz 1b\n\t"
                     "vzeroupper"
                     : "+r"(remaining)
                     : "r"(ones), "r"(small)
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",
                       "xmm17", "cc");
    double seconds = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - start;
    return 64.0 * DOT_ACCUMULATORS * DOT_ITERS / seconds / 1e9;
}
#undef DOT
#undef ZERO

// AMX tdpbf16ps: a 16x16 fp32 tile += 16x32 bf16 . 32x16 bf16 (16384
// flops); four independent accumulator tiles.
__attribute__((target("amx-tile,amx-bf16"))) static double amx_gflops_one_thread(void) {
    const long iters = 200000;
    // in static storage, for the reason in kernels/matmul_bf16.c's amx_configure
    static const struct {
        unsigned char palette, start_row, reserved[14];
        unsigned short colsb[16];
        unsigned char rows[16];
    } config __attribute__((aligned(64))) = {.palette = 1,
                                             .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                                             .rows = {16, 16, 16, 16, 16, 16, 16, 16}};
    static unsigned short ones[16 * 32] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; i++) ones[i] = 0x3c00; // 2^-7
    _tile_loadconfig(&config);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    double start = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (long it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    double seconds = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - start;
    _tile_release();
    return 16384.0 * 4 * iters / seconds / 1e9;
}
#endif

// Best of three, on `threads` threads each running the probe.
static double bf16_probe_gflops(int amx, int threads) {
#if defined(__x86_64__)
    if (amx ? !cpu_has_amx_bf16() : !cpu_has_avx512_bf16()) return 0.0;
    double best = 0.0;
    for (int rep = 0; rep < 3; rep++) {
        double total = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        total += amx ? amx_gflops_one_thread() : vdpbf16ps_gflops_one_thread();
        if (total > best) best = total;
    }
    return best;
#else
    (void)amx, (void)threads;
    return 0.0;
#endif
}

// ---- a training step

typedef struct {
    const char *name, *key; // key: the history file's shape, "default" or "larger"
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

// One shape's training step measured: median and mean ms, the breakdown
// by op (mean ms per step, adding up to the mean step with `other`), and
// what Muon's update of the matrices adds (0 unless asked).
typedef struct {
    double median_ms, mean_ms, cpu_ms; // cpu_ms: the process's CPU time a step, median
    double op_ms[NUM_PROFILED_OPS], optimizer_ms, other_ms, muon_ms;
    double flops, product_flops; // the model's (model_flops), and its products' alone
    size_t params;
} StepResult;

// The products' share of model_flops: 6 * P * B*T (the linear layers and
// the head), without attention's T^2 terms.
static double product_flops(const GPTConfig *c, int B, int T) {
    double P = 12.0 * c->layers * c->dim * c->dim + (double)c->vocab_size * c->dim;
    return 6.0 * P * B * T;
}

// Steps of `shape` with `block`'s choices in `precision`: 3 warm-up steps,
// then shape->iters timed. With a tuner, each step runs on the thread count
// it chooses, as bin/train's do.
static StepResult measure_step(const Shape *shape, const GPTConfig *block, Precision precision,
                               ThreadTuner *tuner, int with_muon) {
    GPTConfig cfg = *block;
    cfg.vocab_size = 65, cfg.context = shape->context, cfg.layers = shape->layers;
    cfg.heads = shape->heads, cfg.dim = shape->dim;
    int B = shape->batch, T = shape->context;
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 1);
    gpt_set_precision(&model, precision, model.products.bf16);
    gpt_alloc_training(&model, B, T);
    AdamW opt;
    adamw_init(&opt, model.num_params);
    AdamWConfig acfg = {.lr = 1e-3f, .min_lr = 1e-4f, .warmup = 100, .iters = 2000, .beta1 = 0.9f,
                        .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
    int *inputs = xmalloc(sizeof(int) * B * T), *targets = xmalloc(sizeof(int) * B * T);
    Rng rng;
    rng_seed(&rng, 7);
    for (int i = 0; i < B * T; i++) {
        inputs[i] = (int)rng_below(&rng, cfg.vocab_size);
        targets[i] = (int)rng_below(&rng, cfg.vocab_size);
    }
    int warmup = 3, n = shape->iters;
    double *ms = xcalloc(n, sizeof(double)), *cpu_ms = xcalloc(n, sizeof(double));
    double optimizer_seconds = 0.0;
    for (int it = -warmup; it < n; it++) {
        if (it == 0) memset(op_seconds, 0, sizeof op_seconds);
        if (tuner) thread_tuner_next(tuner);
        double start = now_seconds(), cpu_start = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
        gpt_forward(&model, inputs, B, T,
                    (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
        gpt_zero_grad(&model, model.grads_memory);
        gpt_backward(&model, inputs, NULL, model.grads_memory);
        double opt_start = now_seconds();
        float norm = grad_global_norm(model.grads_memory, model.num_params);
        adamw_update(&opt, &model, &acfg, 1e-4f, norm > 1.0f ? 1.0f / norm : 1.0f);
        double end = now_seconds();
        if (tuner) thread_tuner_record(tuner, end - start);
        if (it >= 0) {
            ms[it] = 1e3 * (end - start);
            cpu_ms[it] = 1e3 * (cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_start);
            optimizer_seconds += end - opt_start;
        }
    }
    StepResult r = {.flops = model_flops(&cfg, B, T), .product_flops = product_flops(&cfg, B, T),
                    .params = model.num_params};
    for (int i = 0; i < n; i++) r.mean_ms += ms[i] / n;
    qsort(ms, n, sizeof(double), compare_doubles);
    r.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    qsort(cpu_ms, n, sizeof(double), compare_doubles);
    r.cpu_ms = n % 2 ? cpu_ms[n / 2] : 0.5 * (cpu_ms[n / 2 - 1] + cpu_ms[n / 2]);
    r.other_ms = r.mean_ms;
    for (int op = 0; op < NUM_PROFILED_OPS; op++) {
        r.op_ms[op] = 1e3 * op_seconds[op] / n;
        r.other_ms -= r.op_ms[op];
    }
    r.optimizer_ms = 1e3 * optimizer_seconds / n;
    r.other_ms -= r.optimizer_ms;
    if (with_muon) {
        // Muon's update of the blocks' matrices (momentum, 5 Newton-Schulz
        // steps in this precision, the update), timed apart after the
        // steps (its products are linear_forward's); a Muon step is about
        // the step plus it (AdamW's part on the matrices is a few percent)
        Muon muon;
        muon_init(&muon, model.num_params);
        muon_reserve(&muon, &model);
        double muon_seconds = 0.0;
        for (int it = -warmup; it < n; it++) {
            double start = now_seconds();
            muon_update(&muon, &model, 1e-4f, 0.1f, 1.0f);
            if (it >= 0) muon_seconds += now_seconds() - start;
        }
        r.muon_ms = 1e3 * muon_seconds / n;
        muon_free(&muon);
    }
    free(ms), free(cpu_ms), free(inputs), free(targets);
    adamw_free(&opt);
    gpt_free(&model);
    return r;
}

// Median ms per training step of `shape` in `precision`, with
// the breakdown printed when `verbose`. With a tuner, each step runs on the
// thread count it chooses, as bin/train's do; *mean_ms (if not NULL) gets
// the mean, which counts the tuner's trials.
static double bench_training_block(const Shape *shape, const GPTConfig *block, Precision precision,
                                   double peak_gflops, int verbose, ThreadTuner *tuner,
                                   double *mean_ms) {
    StepResult r = measure_step(shape, block, precision, tuner, verbose);
    if (mean_ms) *mean_ms = r.mean_ms;
    if (!verbose) return r.median_ms;
    int B = shape->batch, T = shape->context, n = shape->iters;
    double median = r.median_ms, total_ms = r.mean_ms * n;
    double gflops = r.flops / (median * 1e-3) / 1e9;
    printf("\n%s [%s]: %d layers, %d heads, dim %d, context %d, batch %d (%zu parameters)\n",
           shape->name, precision_name(precision), shape->layers, shape->heads, shape->dim,
           shape->context, B, r.params);
    printf("  %-28s %10.1f ms/iter (median of %d, after %d warm-up)\n", "training step", median, n,
           3);
    printf("  %-28s %10.0f tokens/s\n", "throughput", B * T / (median * 1e-3));
    int threads = omp_get_max_threads();
    history_append("train_step", shape->key, precision_name(precision), threads, "ms_per_iter",
                   median, 1);
    history_append("train_step", shape->key, precision_name(precision), threads, "tokens_per_s",
                   B * T / (median * 1e-3), 0);
    printf("  %-28s %10.2f GFLOP per iteration\n", "model arithmetic", r.flops / 1e9);
    printf("  %-28s %10.1f GFLOP/s = %.0f%% of the measured %s peak %.0f GFLOP/s\n", "model speed",
           gflops, 100.0 * gflops / peak_gflops, precision_name(precision), peak_gflops);
    printf("  breakdown (mean per iteration):\n");
    for (int op = 0; op < NUM_PROFILED_OPS; op++)
        printf("    %-26s %8.2f ms  %5.1f%%\n", op_names[op], r.op_ms[op],
               100.0 * r.op_ms[op] / (total_ms / n));
    printf("    %-26s %8.2f ms  %5.1f%%\n", "optimizer (norm + AdamW)", r.optimizer_ms,
           100.0 * r.optimizer_ms / (total_ms / n));
    printf("    %-26s %8.2f ms  %5.1f%%\n", "other (dropout, copies)", r.other_ms,
           100.0 * r.other_ms / (total_ms / n));
    printf("  %-28s %10.2f ms = %.1f%% of a Muon step (median + it)\n", "Muon's update (matrices)",
           r.muon_ms, 100.0 * r.muon_ms / (median + r.muon_ms));
    return median;
}

// GPT-2's block.
static double bench_training(const Shape *shape, Precision precision, double peak_gflops, int verbose,
                             ThreadTuner *tuner, double *mean_ms) {
    return bench_training_block(shape, &(GPTConfig){0}, precision, peak_gflops, verbose, tuner,
                                mean_ms);
}

// Each choice of the block alone, and the modern block's together, against
// GPT-2's at the 5- and 15-minute recipes' shape (4 x 128, context 128,
// batch 16), in the default precision: rounds alternating the two, the
// median of the rounds' ratios (the machine's drift cancels within a
// round). SwiGLU at 132 wide (8C/3 whole), its baseline at 132 too.
static void bench_blocks(int threads, int quick) {
    const struct {
        const char *name;
        GPTConfig block;
        int dim;
    } choices[] = {
        {"RMSNorm", {.norm = NORM_RMSNORM}, 128},
        {"RoPE", {.pos = POS_ROPE, .rope_base = 10000}, 128},
        {"ReLU^2", {.mlp = MLP_RELU2}, 128},
        {"QK-norm", {.qk_norm = 1}, 128},
        {"softcap 15", {.softcap = 15}, 128},
        {"untied head", {.untie = 1}, 128},
        {"SwiGLU (132 wide)", {.mlp = MLP_SWIGLU}, 132},
        {"smear", {.smear = 1}, 128},
        {"key offset", {.key_offset = 1}, 128},
        {"value embeddings", {.value_embed = 1}, 128},
        {"RMSNorm+RoPE+QK-norm+ReLU^2+cap", {.norm = NORM_RMSNORM, .pos = POS_ROPE,
                                              .rope_base = 10000, .mlp = MLP_RELU2, .qk_norm = 1,
                                              .softcap = 15}, 128},
    };
    Precision precision = precision_default();
    int rounds = quick ? 3 : 7;
    printf("\nthe block's choices, %s, %d threads, 4 x 128 (context 128, batch 16), ms/iter and "
           "the median ratio of %d alternating rounds to GPT-2's block:\n",
           precision_name(precision), threads, rounds);
    for (size_t i = 0; i < sizeof choices / sizeof choices[0]; i++) {
        Shape shape = {choices[i].name, "block", 4, 4, choices[i].dim, 128, 16, quick ? 5 : 15};
        double ratios[16], ms = 0, base_ms = 0;
        for (int r = 0; r < rounds; r++) {
            base_ms = bench_training(&shape, precision, 1.0, 0, NULL, NULL);
            ms = bench_training_block(&shape, &choices[i].block, precision, 1.0, 0, NULL, NULL);
            ratios[r] = ms / base_ms;
        }
        qsort(ratios, (size_t)rounds, sizeof ratios[0], compare_doubles);
        printf("  %-34s %7.2f ms  (GPT-2's %.2f)  %.3fx\n", choices[i].name, ms, base_ms,
               ratios[rounds / 2]);
        history_append("block_step_ratio", choices[i].name, precision_name(precision), threads,
                       "ratio", ratios[rounds / 2], 3);
    }
}

// ---- what people train: every recipe's shape
//
// The shapes of bin/train's default, of each --minutes row
// (train/recipes.c; rows that differ only in dropout or the passes share a
// shape), of the induction recipe (train/named_recipes.c), and the larger
// shape. Each as ms a step, tokens/s and its fraction of this host's
// measured peak in that precision, per CPU second (cpu ms: the process's
// CPU time a step, every thread's; against one core's peak), so that a
// shared machine's other processes count for less; the products' alone
// (the linear layers and the head: 6 P B T flops over their time); and
// the breakdown by op, in percent of the mean step, which adds up to it. Recipes train with
// Muon: its update of the matrices, in ms, comes on top of the step.
typedef struct {
    Shape shape;
    GPTConfig block;
    int muon;
} RecipeShape;

static const RecipeShape recipe_shapes[] = {
    {{"default (no --minutes)", "default", 4, 4, 128, 64, 12, 30}, {0}, 0},
    {{"--minutes 1", "minutes_1", 4, 4, 128, 64, 16, 30}, {0}, 1},
    {{"--minutes 5/15/60, RoPE", "minutes_5_rope", 4, 4, 128, 128, 16, 20},
     {.pos = POS_ROPE, .rope_base = 10000}, 1},
    {{"--minutes 15/60 wider, RoPE", "minutes_15_wide", 4, 4, 192, 128, 16, 15},
     {.pos = POS_ROPE, .rope_base = 10000}, 1},
    {{"--minutes 15/60 large corpus", "minutes_15_large", 4, 4, 192, 128, 16, 15}, {0}, 1},
    {{"--recipe induction", "induction", 2, 4, 128, 256, 16, 15}, {0}, 1},
    {{"larger (6 x 384, ctx 256, b 8)", "larger", 6, 6, 384, 256, 8, 4}, {0}, 0},
};

// "model name, family F model M" from /proc/cpuinfo (or "unknown").
static void cpu_description(char *out, size_t len) {
    char name[256] = "unknown", line[512];
    int family = -1, model = -1;
    FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
    while (cpuinfo && fgets(line, sizeof line, cpuinfo)) {
        if (sscanf(line, "model name : %255[^\n]", name) == 1) break;
        if (sscanf(line, "cpu family : %d", &family) == 1) continue;
        if (sscanf(line, "model : %d", &model) == 1) continue;
    }
    if (cpuinfo) fclose(cpuinfo);
    snprintf(out, len, "%s, family %d model %d", name, family, model);
}

static void bench_recipes(int threads, double fp32_peak, double bf16_peak, int quick) {
    char cpu[400];
    cpu_description(cpu, sizeof cpu);
    const char *cap = getenv("GPT_KERNELS");
    int bf16_native = cpu_has_avx512_bf16() || cpu_has_amx_bf16();
    printf("\nrecipes' shapes, %d threads, on %s; fp32 products: %s variant%s%s%s\n", threads, cpu,
           matmul_fp32_kernel_name(), cap && *cap ? " (GPT_KERNELS=" : "", cap && *cap ? cap : "",
           cap && *cap ? ")" : "");
    printf("  peaks (our probes, per CPU second): fp32 %.0f GFLOP/s a core%s", fp32_peak / threads,
           bf16_native ? "" : "\n");
    if (bf16_native) printf(", bf16 %.0f GFLOP/s a core\n", bf16_peak / threads);
    printf("  %-31s %-5s %8s %8s %8s %6s %6s | %s | %s\n", "shape", "prec", "ms/step", "cpu ms", "tok/s",
           "%peak", "%prod", "breakdown, % of the step: mm-fwd mm-bwd att-fwd att-bwd norm gelu "
           "loss elem optim other", "+Muon ms");
    for (size_t i = 0; i < sizeof recipe_shapes / sizeof recipe_shapes[0]; i++)
        for (int p = 0; p < (bf16_native ? 2 : 1); p++) {
            const RecipeShape *rs = &recipe_shapes[i];
            Shape shape = rs->shape;
            if (quick) shape.iters = shape.iters / 3 > 2 ? shape.iters / 3 : 2;
            Precision precision = p ? PRECISION_BF16 : PRECISION_FP32;
            double peak = p ? bf16_peak : fp32_peak;
            StepResult r = measure_step(&shape, &rs->block, precision, NULL, rs->muon);
            double tokens = shape.batch * shape.context / (r.median_ms * 1e-3);
            // per CPU second against a core's peak; the products' CPU time
            // taken as their share of the wall time
            double core_peak = peak / threads;
            double of_peak = r.flops / (r.cpu_ms * 1e-3) / 1e9 / core_peak;
            double product_share = (r.op_ms[OP_MATMUL_FWD] + r.op_ms[OP_MATMUL_BWD]) / r.mean_ms;
            double of_peak_products = r.product_flops / (product_share * r.cpu_ms * 1e-3) / 1e9 / core_peak;
            printf("  %-31s %-5s %8.2f %8.2f %8.0f %5.1f%% %5.1f%% |", shape.name,
                   precision_name(precision), r.median_ms, r.cpu_ms, tokens, 100.0 * of_peak,
                   100.0 * of_peak_products);
            for (int op = 0; op < NUM_PROFILED_OPS; op++) printf(" %4.1f", 100.0 * r.op_ms[op] / r.mean_ms);
            printf(" %4.1f %4.1f | %6.2f\n", 100.0 * r.optimizer_ms / r.mean_ms,
                   100.0 * r.other_ms / r.mean_ms, r.muon_ms);
            fflush(stdout);
            char precision_kernels[64];
            snprintf(precision_kernels, sizeof precision_kernels, "%s/%s", precision_name(precision),
                     p ? bf16_kernel_name(bf16_best_kernel(BF16_AMX)) : matmul_fp32_kernel_name());
            history_append("recipe_step", shape.key, precision_kernels, threads, "ms_per_iter",
                           r.median_ms, 2);
            history_append("recipe_step", shape.key, precision_kernels, threads, "tokens_per_s",
                           tokens, 0);
            history_append("recipe_step", shape.key, precision_kernels, threads, "cpu_ms_per_iter",
                           r.cpu_ms, 2);
            history_append("recipe_step", shape.key, precision_kernels, threads, "fraction_of_peak",
                           of_peak, 3);
            history_append("recipe_step", shape.key, precision_kernels, threads,
                           "products_fraction_of_peak", of_peak_products, 3);
        }
}

// ---- the default recipe beside a busy process

// A child process spinning on `core` until killed.
static pid_t start_busy_loop(int core) {
    pid_t pid = fork();
    if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(core, &set);
        sched_setaffinity(0, sizeof set, &set);
        volatile unsigned long spin = 0;
        for (;;) spin++;
    }
    return pid;
}

// The default recipe beside a busy loop pinned to the last core: bin/train's
// default (every core, the thread tuner choosing), all threads fixed, one
// thread fixed. Mean ms per step over `iters` steps (the tuner's trials and
// its first steps on the slow count included).
static void bench_busy(const Shape *shape, Precision precision, double peak, int threads) {
    if (threads < 2) return;
    pid_t busy = start_busy_loop(threads - 1);
    if (busy < 0) return;
    Shape busy_shape = *shape;
    busy_shape.iters = 300;
    double tuned, shared, alone;
    ThreadTuner tuner;
    thread_tuner_init(&tuner, threads, 1);
    bench_training(&busy_shape, precision, peak, 0, &tuner, &tuned);
    omp_set_num_threads(threads);
    bench_training(&busy_shape, precision, peak, 0, NULL, &shared);
    omp_set_num_threads(1);
    bench_training(&busy_shape, precision, peak, 0, NULL, &alone);
    omp_set_num_threads(threads);
    kill(busy, SIGKILL);
    waitpid(busy, NULL, 0);
    printf("\nbusy machine [%s], %s, a busy loop pinned to core %d, mean of %d steps:\n"
           "  default (thread tuner, up to %d threads) %.1f ms/iter, %d threads fixed %.1f, "
           "1 thread %.1f: default / 1 thread = %.2f\n",
           precision_name(precision), shape->name, threads - 1, busy_shape.iters,
           threads, tuned, threads, shared, alone, tuned / alone);
}

// ---- sampling with the KV cache, one thread

static void bench_sampling(void) {
    omp_set_num_threads(1);
    GPTConfig cfg = {.vocab_size = 65, .context = 64, .layers = 4, .heads = 4, .dim = 128};
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 1);
    KVCache cache;
    kv_cache_init_samples(&cache, &model, 1, 32);
    Sampler sampler;
    sampler_init(&sampler, cfg.vocab_size, 0.8f, 0, 1.0f, 1);
    int n = 20000;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        kv_cache_empty(&cache);
        double start = now_seconds();
        const float *logits = kv_cache_step(&cache, 0);
        for (int i = 0; i < n; i++) logits = kv_cache_step(&cache, sampler_sample(&sampler, logits));
        double seconds = now_seconds() - start;
        if (seconds < best) best = seconds;
    }
    printf("\nsampling, default shape, 1 thread, KV cache, --slide 32: %.0f tokens/s (best of 3 x %d tokens)\n",
           n / best, n);
    sampler_free(&sampler);
    kv_cache_free(&cache);
    gpt_free(&model);
}

// bin/bench --steps: only the training steps of both shapes in both
// precisions, as the summary lines below (what scripts/compare_pytorch.py
// alternates with PyTorch's).
static int bench_steps_only(int threads) {
    omp_set_num_threads(threads);
    Shape shapes[] = {{"default recipe", "default", 4, 4, 128, 64, 12, 30},
                      {"larger shape", "larger", 6, 6, 384, 256, 8, 5}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double ms[2];
        for (int p = 0; p < 2; p++) {
            ms[p] = bench_training(&shapes[i], p ? PRECISION_BF16 : PRECISION_FP32, 1.0, 0, NULL,
                                   NULL);
        }
        printf("  %-16s fp32 %8.1f   bf16 %8.1f\n", shapes[i].name, ms[0], ms[1]);
        fflush(stdout);
        history_append("train_step", shapes[i].key, "fp32", threads, "ms_per_iter", ms[0], 1);
        history_append("train_step", shapes[i].key, "bf16", threads, "ms_per_iter", ms[1], 1);
    }
    return 0;
}

int main(int argc, char **argv) {
    int quick = 0, steps = 0, blocks = 0, recipes = 0, threads = omp_get_num_procs();
    Option table[] = {
        {"--quick", NULL, OPT_FLAG, &quick, "fewer steps of each shape", 0, -1, 0},
        {"--steps", NULL, OPT_FLAG, &steps,
         "only the training steps, one summary line a shape (scripts/compare_pytorch.py)", 0, -1, 0},
        {"--recipes", NULL, OPT_FLAG, &recipes,
         "only the peaks and every recipe's shape, one line each with its breakdown", 0, -1, 0},
        {"--blocks", NULL, OPT_FLAG, &blocks,
         "only the block's choices against GPT-2's block (their step times)", 0, -1, 0},
        {"--history", "FILE", OPT_STRING, &bench_history.path,
         "append each headline figure to FILE as a CSV row; unset: none", 0, -1, 0},
        {"--commit", "HASH", OPT_STRING, &bench_history.commit, "the code measured, for --history's rows",
         0, -1, 0},
        {"--threads", "N", OPT_INT, &threads,
         "threads (default: the processors; 1 beside the default gives the steps' scaling)", 1, 1024, 0},
    };
    int num_options = sizeof table / sizeof table[0];
    char err[1024];
    int parsed = options_parse(table, num_options, argc, argv, err, sizeof err);
    if (parsed == OPTIONS_HELP) {
        options_usage(stdout,
                      "usage: bin/bench [--quick | --steps | --blocks | --recipes] [--threads N] [--history FILE [--commit HASH]]",
                      table, num_options);
        return 0;
    }
    if (!parsed) usage_error("%s", err);
    if (steps) return bench_steps_only(threads);
    if (blocks) {
        omp_set_num_threads(threads);
        bench_blocks(threads, quick);
        return 0;
    }
    printf("bench: %d threads%s\n", threads, quick ? " (quick)" : "");
    double peak1 = fma_probe_gflops(1), peak = fma_probe_gflops(threads);
    printf("fp32 FMA peak (our probe): %.0f GFLOP/s on 1 thread, %.0f on %d\n", peak1, peak,
           threads);
    history_append("fma_peak", "", "fp32", 1, "gflops", peak1, 0);
    history_append("fma_peak", "", "fp32", threads, "gflops", peak, 0);
    double dot1 = bf16_probe_gflops(0, 1), dot = bf16_probe_gflops(0, threads);
    double amx1 = bf16_probe_gflops(1, 1), amx = bf16_probe_gflops(1, threads);
    if (dot > 0) {
        printf("bf16 dot peak, AVX512_BF16 vdpbf16ps (our probe): %.0f GFLOP/s on 1 thread, %.0f on %d\n",
               dot1, dot, threads);
        history_append("fma_peak", "vdpbf16ps", "bf16", 1, "gflops", dot1, 0);
        history_append("fma_peak", "vdpbf16ps", "bf16", threads, "gflops", dot, 0);
    }
    if (amx > 0) {
        printf("bf16 tile peak, AMX tdpbf16ps (our probe): %.0f GFLOP/s on 1 thread, %.0f on %d\n",
               amx1, amx, threads);
        history_append("fma_peak", "tdpbf16ps", "bf16", 1, "gflops", amx1, 0);
        history_append("fma_peak", "tdpbf16ps", "bf16", threads, "gflops", amx, 0);
    }
    if (dot == 0 && amx == 0) printf("bf16: no bf16 instructions on this CPU (bf16 runs as fp32 arithmetic)\n");
    double bf16_peak = amx > 0 ? amx : dot > 0 ? dot : peak;
    printf("fp32 products run on: %s\n", matmul_fp32_kernel_name());
    printf("bf16 products run on: %s\n", bf16_kernel_name(bf16_best_kernel(BF16_AMX)));
    omp_set_num_threads(threads);
    bench_recipes(threads, peak, bf16_peak, quick);
    if (recipes) return 0;
    Shape shapes[] = {{"default recipe", "default", 4, 4, 128, 64, 12, quick ? 5 : 50},
                      {"larger shape", "larger", 6, 6, 384, 256, 8, quick ? 2 : 7}};
    double ms[2][2];
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int p = 0; p < 2; p++) {
            ms[i][p] = bench_training(&shapes[i], p ? PRECISION_BF16 : PRECISION_FP32,
                                      p ? bf16_peak : peak, 1, NULL, NULL);
        }
    printf("\nsummary, %d threads, ms/iter (median):\n", threads);
    for (size_t i = 0; i < 2; i++)
        printf("  %-16s fp32 %8.1f   bf16 %8.1f   (bf16 %.2fx faster)\n", shapes[i].name,
               ms[i][0], ms[i][1], ms[i][0] / ms[i][1]);
    bench_blocks(threads, quick);
    bench_busy(&shapes[0], precision_default(), peak, threads);
    bench_sampling();
    return 0;
}
