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
    // Tensors another optimizer updates (Muon's matrices, muon.h): AdamW
    // leaves them, and their moments, as they are. None after adamw_init.
    unsigned char skip[NUM_PARAM_TENSORS];
} AdamW;

// The learning-rate schedules, by name (bin/train's --schedule).
typedef enum { SCHEDULE_COSINE, SCHEDULE_WSD } ScheduleKind;
extern const char *const schedule_names[2];

typedef struct {
    float lr, min_lr;
    int warmup, iters;
    float beta1, beta2, eps, weight_decay, grad_clip;
    ScheduleKind schedule; // the cosine unless set
    int decay_from;        // SCHEDULE_WSD: the step its linear decay starts at
} AdamWConfig;

void adamw_init(AdamW *opt, size_t num_params);
void adamw_free(AdamW *opt);

// Learning rate at iteration `it` (0-based): schedule_rate from lr to min_lr.
float lr_at(const AdamWConfig *cfg, long it);
// The schedule's rate at iteration `it` for a peak rate and a final one:
// linear warmup over `warmup` iterations (peak (it+1)/(warmup+1)), then
//   cosine: from peak down to final at `iters` (nanoGPT's);
//   wsd (warmup, stable, decay): peak until decay_from, then linear from
//        peak at decay_from down to final at `iters`.
// final past `iters`.
float schedule_rate(const AdamWConfig *cfg, long it, float peak, float final);
// wsd's decay_from for a decay over the last `fraction` of `iters`
// iterations (rounded to the nearest step), not before the warmup ends.
int wsd_decay_from(int iters, int warmup, float fraction);

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
