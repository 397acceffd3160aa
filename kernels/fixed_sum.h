// fixed_sum.h: a sum over a row in an order the source fixes, for the
// reductions inside a row (LayerNorm's mean and variance, RMSNorm's).
//
// `#pragma omp simd reduction` lets the vectorizer choose the order of a
// sum (its vector width, how many partial sums it keeps), and it chooses
// per copy of a loop: FOR_EACH (parallel.h) compiles its body twice, for
// one thread and for several, and the two copies may then sum the same row
// differently, so that results depend on the thread count. Here element i
// goes to lane i % SUM_LANES, each lane sums its elements in index order,
// and the lanes are added pairwise (lane l + w into lane l, w = 8, 4, 2, 1).
// Without reassociation (no -ffast-math) no compiler may change that
// order, and it still keeps the lanes in vector registers. The same bits on
// every instruction set that fuses the same multiply-adds.
#ifndef FIXED_SUM_H
#define FIXED_SUM_H

#define SUM_LANES 16

// result = the sum of term over i = 0 .. n-1 (term an expression of the
// long i).
#define FIXED_SUM(result, i, n, term)                                                           \
    do {                                                                                        \
        float lanes_[SUM_LANES] = {0};                                                          \
        long n_ = (n), full_ = n_ / SUM_LANES * SUM_LANES;                                      \
        for (long i0_ = 0; i0_ < full_; i0_ += SUM_LANES)                                       \
            for (int l_ = 0; l_ < SUM_LANES; l_++) {                                            \
                long i = i0_ + l_;                                                              \
                lanes_[l_] += (term);                                                           \
            }                                                                                   \
        for (long i = full_; i < n_; i++) lanes_[i - full_] += (term);                          \
        for (int w_ = SUM_LANES / 2; w_ > 0; w_ /= 2)                                           \
            for (int l_ = 0; l_ < w_; l_++) lanes_[l_] += lanes_[l_ + w_];                      \
        (result) = lanes_[0];                                                                   \
    } while (0)

#endif
