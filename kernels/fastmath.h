// fastmath.h: exp written so that the compiler vectorises the loops that
// call it (libm's expf and tanhf are opaque calls, one element at a time).
//
// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in
// [-ln2/2, ln2/2]; exp(r) by its Taylor series to degree 7, whose
// truncation error there is below 0.347^8/8! ~ 5e-9, relative: the result
// is within a few float ulps of the true value. Inputs are clamped to
// [-87, 88], where 2^n stays a normal float; exp(-87) ~ 1.6e-38 stands for
// anything smaller (callers add it to sums of order 1, or multiply it by
// something small).
#ifndef FASTMATH_H
#define FASTMATH_H

#include <stdint.h>
#include <string.h>

// x < bound ? bound : x (below = 1), or x > bound ? bound : x (below = 0),
// by a mask rather than a branch; a NaN x stays NaN. Written as branches,
// the clamps let GCC's jump threading give each clamped case its own copy
// of the caller's arithmetic (exp of a constant, folded): GELU's loop then
// ran three divisions per vector instead of one.
static inline float clamp_by_mask(float x, float bound, int below) {
    uint32_t x_bits, bound_bits;
    memcpy(&x_bits, &x, sizeof x_bits);
    memcpy(&bound_bits, &bound, sizeof bound_bits);
    uint32_t mask = 0u - (uint32_t)(below ? x < bound : x > bound);
    uint32_t bits = (mask & bound_bits) | (~mask & x_bits);
    memcpy(&x, &bits, sizeof x);
    return x;
}

static inline float fast_expf(float x) {
    x = clamp_by_mask(x, -87.0f, 1);
    x = clamp_by_mask(x, 88.0f, 0);
    // round to nearest by adding 1.5 * 2^23 (valid for |x / ln2| < 2^22)
    const float shifter = 12582912.0f;
    float shifted = x * 1.44269504088896341f + shifter;
    float n = shifted - shifter;
    // Cody-Waite: ln 2 split in two so n * ln2_hi is exact
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    // 2^n: n + 127 in the exponent field. n is read from the low bits of
    // `shifted` (1.5 * 2^23 + n) in unsigned arithmetic: converting a NaN
    // input's n to int and shifting it would be undefined behaviour; this
    // way the result is simply NaN.
    uint32_t shifted_bits;
    memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
    uint32_t bits = (shifted_bits - 0x4B400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

#endif
