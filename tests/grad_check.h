// grad_check.h: what the gradient tests share: random inputs, gradient
// buffers that start away from zero, and one tolerance (its reasoning is at
// the top of test_ops.c).
#ifndef GRAD_CHECK_H
#define GRAD_CHECK_H

#include <stdlib.h>

#include "../base/util.h"

#define GRAD_STEP 1e-3f // h of the central differences
#define GRAD_ATOL 1e-3  // |analytic - numeric| <= ATOL + RTOL * max(|analytic|, |numeric|)
#define GRAD_RTOL 1e-2

// Every backward accumulates (+=) into its d_ outputs. The gradient buffers
// of the checks start at GRAD_START instead of 0 and the checks subtract it,
// so a backward that overwrote (=) would fail them.
#define GRAD_START 1.0f

static inline float *random_normal(Rng *rng, long n, float scale, float offset) {
    float *x = xmalloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) x[i] = offset + scale * rng_normal(rng);
    return x;
}

static inline float *zeros(long n) { return xcalloc((size_t)n, sizeof(float)); }

static inline float *gradient_buffer(long n) {
    float *g = xmalloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) g[i] = GRAD_START;
    return g;
}

#endif
