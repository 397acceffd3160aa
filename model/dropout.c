// dropout.c: inverted dropout with counter-based masks (see dropout.h).
#include "dropout.h"

#include <math.h>

#include "../kernels/parallel.h"

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

DropoutMask dropout_mask(const Dropout *d, int kind, int layer, long row_elements) {
    // Each field hashed in turn, so nearby seeds, steps and tensors give
    // unrelated keys.
    uint64_t key = mix64(d->seed ^ 0x5851f42d4c957f2dull);
    key = mix64(key ^ (uint64_t)d->step);
    key = mix64(key ^ (uint64_t)(kind + 4 * (long)layer));
    double threshold = ldexp((double)d->p, 32);
    return (DropoutMask){key, threshold >= 4294967295.0 ? 0xffffffffu : (uint32_t)threshold,
                         1.0f / (1.0f - d->p), (uint64_t)d->first_row * (uint64_t)row_elements};
}

#define DROPOUT_CHUNK 4096

// The element loops are kept apart from the threading so that the compiler
// vectorises the hash (64-bit multiplies, vpmullq under AVX-512): inline in
// the parallel loops they ran one element at a time, and dropout on the
// attention probabilities of the 5-minute shape cost a quarter of a step.
static void forward_chunk(float *out, const float *inp, long begin, long end, long first,
                          const DropoutMask *m) {
    const DropoutMask mask = *m;
    const float scale = mask.scale;
    for (long i = begin; i < end; i++) {
        float kept = inp[i] * scale;
        out[i] = dropout_keeps(&mask, (uint64_t)(first + i)) ? kept : 0.0f;
    }
}

static void backward_chunk(float *d_inp, const float *d_out, long begin, long end, long first,
                           const DropoutMask *m) {
    const DropoutMask mask = *m;
    const float scale = mask.scale;
    for (long i = begin; i < end; i++) {
        float sum = d_inp[i] + d_out[i] * scale;
        d_inp[i] = dropout_keeps(&mask, (uint64_t)(first + i)) ? sum : d_inp[i];
    }
}

void dropout_forward(float *out, const float *inp, long n, long first, const DropoutMask *m) {
    long chunks = (n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
    FOR_EACH(chunk, chunks, n * 4, {
        long end = (chunk + 1) * DROPOUT_CHUNK < n ? (chunk + 1) * DROPOUT_CHUNK : n;
        forward_chunk(out, inp, chunk * DROPOUT_CHUNK, end, first, m);
    });
}

void dropout_backward(float *d_inp, const float *d_out, long n, long first, const DropoutMask *m) {
    long chunks = (n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
    FOR_EACH(chunk, chunks, n * 4, {
        long end = (chunk + 1) * DROPOUT_CHUNK < n ? (chunk + 1) * DROPOUT_CHUNK : n;
        backward_chunk(d_inp, d_out, chunk * DROPOUT_CHUNK, end, first, m);
    });
}
