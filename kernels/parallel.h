// parallel.h: spread a loop over the threads only when it is worth it.
// Entering an OpenMP parallel region costs even with one thread (libgomp
// builds a team), and more with two, more than small loops take: the
// single-token steps of sampling run dozens of them per token. Below the threshold the loop runs on the calling thread.
#ifndef PARALLEL_H
#define PARALLEL_H

#include <omp.h>

// Work (elements touched, or multiply-adds) below which a loop stays serial.
#define PARALLEL_MIN_WORK 16384

static inline int worth_threads(long work) {
    return work >= PARALLEL_MIN_WORK && !omp_in_parallel() && omp_get_max_threads() > 1;
}

// Whether a product of m*k*n multiply-adds is worth a parallel region:
// below it, the region's set-up costs more than the product.
static inline int worth_product_threads(long work) {
    return work > 32768 && !omp_in_parallel() && omp_get_max_threads() > 1;
}

// for (long i = 0; i < n; i++) { body }, with the iterations shared among the
// threads when `work` is worth it. The body is written once and compiled
// twice. Static schedule: each thread takes the same contiguous range in
// every op, so a token's activations stay in the L2 of the core that wrote
// them; chunks taken dynamically (8 per thread) lose that and are slower.
// A busy core is the thread tuner's job (base/thread_tuner.c), which moves
// the run to fewer threads. Each iteration owns its outputs, so the split
// changes no bit.
#define FOR_EACH(i, n, work, ...)                                                                 \
    do {                                                                                          \
        long for_each_n_ = (n);                                                                   \
        if (worth_threads(work)) {                                                                \
            _Pragma("omp parallel for schedule(static)")                                          \
            for (long i = 0; i < for_each_n_; i++) {                                              \
                __VA_ARGS__                                                                       \
            }                                                                                     \
        } else {                                                                                  \
            for (long i = 0; i < for_each_n_; i++) {                                              \
                __VA_ARGS__                                                                       \
            }                                                                                     \
        }                                                                                         \
    } while (0)

#endif
