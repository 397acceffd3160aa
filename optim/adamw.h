// adamw.h: AdamW with decoupled weight decay (Loshchilov & Hutter), the
// learning-rate schedule, and gradient clipping by global norm.
#ifndef ADAMW_H
#define ADAMW_H

#include <stddef.h>

#include "../model/gpt.h"

typedef struct {
    float *m, *v;      // (num_params) first and second moments, one buffer each
    size_t num_params;
    long step;         // updates done so far
} AdamW;

typedef struct {
    float lr, min_lr;
    int warmup, iters;
    float beta1, beta2, eps, weight_decay, grad_clip;
} AdamWConfig;

void adamw_init(AdamW *opt, size_t num_params);
void adamw_free(AdamW *opt);

// Learning rate at iteration `it` (0-based): linear warmup over `warmup`
// iterations, then cosine decay from lr to min_lr at `iters` (nanoGPT's).
float lr_at(const AdamWConfig *cfg, long it);

// sqrt(sum of squared gradients), summed in a fixed order, so the same for
// any thread count: 64 chunks of ceil(n / 64) elements (the last ones short
// or empty), each summed in float from its first element to its last, the
// chunks' sums added in double in chunk order.
float grad_global_norm(const float *grads, size_t n);

// One update of every parameter: grads are first scaled by grad_scale (the
// clipping factor), decay applies to matrices and embeddings only
// (param_is_decayed).
void adamw_update(AdamW *opt, GPT *model, const AdamWConfig *cfg, float lr, float grad_scale);

#endif
