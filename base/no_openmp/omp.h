// omp.h for a build without OpenMP (make OPENMP=0, or macOS without
// Homebrew's libomp: docs/platforms.md): the six OpenMP calls the code
// makes, answered as a one-thread OpenMP would answer them. The compiler
// then ignores the `#pragma omp` lines, so every loop runs on the calling
// thread, with the same sums in the same order: the results are those of
// --threads 1. This folder is on the include path only in such a build.
#ifndef NO_OPENMP_OMP_H
#define NO_OPENMP_OMP_H

static inline int omp_get_num_procs(void) { return 1; }
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_in_parallel(void) { return 0; }
static inline void omp_set_num_threads(int threads) { (void)threads; }

#endif
