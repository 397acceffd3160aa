// parallel.h: spread a loop over the threads only when it is worth it.
// Entering an OpenMP parallel region costs about 0.3 us even with one
// thread (libgomp builds a team) and several us with two, more than small
// loops take: the single-token steps of sampling run dozens of them per
// token. Below the threshold the loop runs on the calling thread.
#ifndef PARALLEL_H
#define PARALLEL_H

#include <omp.h>

// Work (elements touched, or multiply-adds) below which a loop stays serial.
#define PARALLEL_MIN_WORK 16384

static inline int worth_threads(long work) {
    return work >= PARALLEL_MIN_WORK && !omp_in_parallel() && omp_get_max_threads() > 1;
}

// for (long i = 0; i < n; i++) { body }, with the iterations shared among the
// threads when `work` is worth it. The body is written once and compiled
// twice. The iterations go in about 8 chunks per thread, taken as threads
// come free: a thread slowed by another process on its core takes fewer
// (each iteration owns its outputs, so which thread runs it changes no bit).
#define FOR_EACH(i, n, work, ...)                                                                 \
    do {                                                                                          \
        long for_each_n_ = (n);                                                                   \
        if (worth_threads(work)) {                                                                \
            long for_each_chunk_ = for_each_n_ / (8L * omp_get_max_threads()) + 1;                \
            _Pragma("omp parallel for schedule(dynamic, for_each_chunk_)")                        \
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
