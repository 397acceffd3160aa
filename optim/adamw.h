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

// The most re-plans a cosine takes (--replans).
#define SCHEDULE_MAX_REPLANS 32

// The learning-rate schedules, by name (bin/train's --schedule).
typedef enum { SCHEDULE_COSINE, SCHEDULE_WSD } ScheduleKind;
extern const char *const schedule_names[2];

typedef struct {
    float lr, min_lr;
    int warmup, iters;
    float beta1, beta2, eps, weight_decay, grad_clip;
    ScheduleKind schedule; // the cosine unless set
    int decay_from;        // SCHEDULE_WSD: the step its linear decay starts at
    // The cosine's re-plans (a --minutes run whose speed changed): at step
    // replan_at[k] the cosine, which had aimed to end at replan_end[k], went
    // on towards the next re-plan's end (after the last, `iters`), from the
    // progress it had reached, so the rate does not jump. None by default.
    int replans;
    int replan_at[SCHEDULE_MAX_REPLANS], replan_end[SCHEDULE_MAX_REPLANS];
} AdamWConfig;

void adamw_init(AdamW *opt, size_t num_params);
void adamw_free(AdamW *opt);

// Learning rate at iteration `it` (0-based): schedule_rate from lr to min_lr.
float lr_at(const AdamWConfig *cfg, long it);
// The schedule's rate at iteration `it` for a peak rate and a final one:
// linear warmup over `warmup` iterations (peak (it+1)/(warmup+1)), then
//   cosine: from peak down to final at `iters` (nanoGPT's): peak
//        0.5 (1 + cos(pi p)) above final at progress p, which runs from 0
//        at the warmup's end to 1 at `iters` (with re-plans, in a straight
//        line between two re-plans, each line aimed at 1 at its end);
//   wsd (warmup, stable, decay): peak until decay_from, then linear from
//        peak at decay_from down to final at `iters`.
// final past `iters`.
float schedule_rate(const AdamWConfig *cfg, long it, float peak, float final);
// wsd's decay_from for a decay over the last `fraction` of `iters`
// iterations (rounded to the nearest step), not before the warmup ends.
int wsd_decay_from(int iters, int warmup, float fraction);
// --replans: "STEP:END,STEP:END,...", the cosine's re-plans in order (each
// STEP after the warmup and the one before, each END above its STEP, the
// last STEP below `iters`), parsed into cfg (whose warmup and iters are
// set). Returns 1, or 0 with a one-line reason in err.
int schedule_parse_replans(AdamWConfig *cfg, const char *text, char *err, size_t err_len);
// cfg's re-plans in --replans' form ("" when none).
void schedule_format_replans(const AdamWConfig *cfg, char *text, size_t len);
// Re-plan the cosine at step `step` to end at `end`: the rate at `step`
// stays what it was. Returns 0, changing nothing, for a re-plan that
// --replans would refuse (step not past the warmup and the last re-plan,
// not below iters, or end not past step) or when the re-plans are full.
int schedule_replan(AdamWConfig *cfg, long step, int end);

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
