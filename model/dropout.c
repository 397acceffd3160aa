// dropout.c: inverted dropout with counter-based masks (see dropout.h).
#include "dropout.h"

#include <math.h>

#include "parallel.h"

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

void dropout_forward(float *out, const float *inp, long n, long first, const DropoutMask *m) {
    long chunks = (n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
    FOR_EACH(chunk, chunks, n * 4, {
        long end = (chunk + 1) * DROPOUT_CHUNK < n ? (chunk + 1) * DROPOUT_CHUNK : n;
        for (long i = chunk * DROPOUT_CHUNK; i < end; i++)
            out[i] = dropout_keeps(m, (uint64_t)(first + i)) ? inp[i] * m->scale : 0.0f;
    });
}

void dropout_backward(float *d_inp, const float *d_out, long n, long first, const DropoutMask *m) {
    long chunks = (n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
    FOR_EACH(chunk, chunks, n * 4, {
        long end = (chunk + 1) * DROPOUT_CHUNK < n ? (chunk + 1) * DROPOUT_CHUNK : n;
        for (long i = chunk * DROPOUT_CHUNK; i < end; i++)
            if (dropout_keeps(m, (uint64_t)(first + i))) d_inp[i] += d_out[i] * m->scale;
    });
}
