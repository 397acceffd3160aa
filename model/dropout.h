// dropout.h: inverted dropout whose mask is a pure function of
// (seed, step, tensor, element): a counter-based generator, not a stream.
// So the mask, and with it every loss, is the same whatever the thread
// count, after a resume, and when a batch is split into micro-batches or
// over processes (an element's index counts from the global batch row).
//
//   keep(e) = hash(key(seed, step, tensor), global index of e) >= p * 2^32
//   y = x * keep / (1 - p)        dx += dy * keep / (1 - p)
#ifndef DROPOUT_H
#define DROPOUT_H

#include <stdint.h>

// Which dropout of the model a mask belongs to: tensor = kind + 4 * layer.
enum { DROPOUT_EMBEDDING, DROPOUT_ATT_PROBS, DROPOUT_ATT_PROJ, DROPOUT_MLP_PROJ };

typedef struct {
    float p;            // probability of dropping an element; 0: off (no work at all)
    uint64_t seed;
    long step;          // the optimizer step this forward belongs to
    long first_row;     // global batch row of this forward's row 0
} Dropout;

// One dropout's mask: the key of (seed, step, tensor), the threshold, and
// where this forward's elements start in the global batch.
typedef struct DropoutMask {
    uint64_t key;
    uint32_t threshold; // drop when the hash's high 32 bits are below it
    float scale;        // 1 / (1 - p)
    uint64_t offset;    // global index of local element 0
} DropoutMask;

// The mask of dropout `kind` in `layer` (0 for the embedding), for a tensor
// whose batch row holds row_elements elements.
DropoutMask dropout_mask(const Dropout *d, int kind, int layer, long row_elements);

// splitmix64's finaliser of key + (index + 1) * golden ratio: counter-based.
static inline int dropout_keeps(const DropoutMask *m, uint64_t index) {
    uint64_t z = m->key + (m->offset + index + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z >> 32) >= m->threshold;
}

// out (n) = inp * keep / (1 - p), element i at local index first + i
// (out may be inp).
void dropout_forward(float *out, const float *inp, long n, long first, const DropoutMask *m);
// d_inp (n) += d_out * keep / (1 - p).
void dropout_backward(float *d_inp, const float *d_out, long n, long first, const DropoutMask *m);

#endif
