// patching.c: activation patching (patching.h), as hooks on the one forward.
#include "patching.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "interpret.h"

// logit(answer) - logit(other) at the last of the T positions of the last
// forward (one window): the logits the model output.
static double last_logit_difference(const GPT *model, int T, int answer, int other) {
    const float *logits = model->scratch.logits + (long)(T - 1) * model->config.vocab_size;
    return (double)logits[answer] - (double)logits[other];
}

static void forward_window(GPT *model, const int *tokens, int T, const ForwardHooks *hooks,
                           int first_layer, const float *start_stream) {
    gpt_forward(model, tokens, 1, T,
                (ForwardArgs){.attention = ATTENTION_KEEP_PROBS, .hooks = hooks,
                              .first_layer = first_layer, .start_stream = start_stream});
}

int predicted_next(GPT *model, const int *tokens, int T) {
    forward_window(model, tokens, T, NULL, 0, NULL);
    int V = model->config.vocab_size, best = 0;
    const float *logits = model->scratch.logits + (long)(T - 1) * V;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    return best;
}

// Head (layer, head)'s slice of att_out, the clean run's at every position.
typedef struct {
    int layer, head, hs, C;
    const float *clean_att_out; // (L,T,C)
    long layer_size;
} HeadPatch;

static void patch_head(const ForwardHooks *h, int l, float *att_out, int rows) {
    const HeadPatch *p = h->state;
    if (l != p->layer) return;
    const float *clean = p->clean_att_out + l * p->layer_size;
    for (int r = 0; r < rows; r++) {
        long at = (long)r * p->C + p->head * p->hs;
        memcpy(att_out + at, clean + at, sizeof(float) * p->hs);
    }
}

int activation_patching(GPT *model, const int *clean, const int *corrupt, int T, int clean_answer,
                        int corrupt_answer, Patching *p, char *err, size_t err_len) {
    const GPTConfig *cfg = &model->config;
    int L = cfg->layers, NH = cfg->heads, C = cfg->dim;
    long layer_size = (long)T * C;
    memset(p, 0, sizeof *p);
    // each run's stream into every block (L,T,C); the clean run's att_out (L,T,C)
    ForwardCopy clean_run = {xmalloc(sizeof(float) * L * layer_size), L,
                             xmalloc(sizeof(float) * L * layer_size), layer_size};
    ForwardCopy corrupt_run = {xmalloc(sizeof(float) * L * layer_size), L, NULL, layer_size};
    ForwardHooks keep = {.attention_output = forward_copy_att_out, .stream = forward_copy_stream,
                         .state = &clean_run};
    forward_window(model, clean, T, &keep, 0, NULL);
    double clean_diff = last_logit_difference(model, T, clean_answer, corrupt_answer);
    keep.state = &corrupt_run;
    forward_window(model, corrupt, T, &keep, 0, NULL);
    double corrupt_diff = last_logit_difference(model, T, clean_answer, corrupt_answer);
    if (!(fabs(clean_diff - corrupt_diff) >= PATCHING_MIN_DIFFERENCE)) {
        set_error(err, err_len, "the logit difference is %.6g on the clean text and %.6g on the "
                  "corrupted one: less than %g apart, nothing to recover", clean_diff,
                  corrupt_diff, PATCHING_MIN_DIFFERENCE);
        free(clean_run.stream), free(clean_run.att_out), free(corrupt_run.stream);
        return 0;
    }
    *p = (Patching){.layers = L, .heads = NH, .T = T, .clean_answer = clean_answer,
                    .corrupt_answer = corrupt_answer, .clean_diff = clean_diff,
                    .corrupt_diff = corrupt_diff,
                    .head_diff = xmalloc(sizeof(double) * L * NH),
                    .stream_diff = xmalloc(sizeof(double) * L * T)};

    // heads: each forward from the head's block, on the corrupted stream into it
    HeadPatch head = {.hs = C / NH, .C = C, .clean_att_out = clean_run.att_out,
                      .layer_size = layer_size};
    ForwardHooks patch = {.attention_output = patch_head, .state = &head};
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++) {
            head.layer = l, head.head = h;
            forward_window(model, corrupt, T, &patch, l, corrupt_run.stream + l * layer_size);
            p->head_diff[l * NH + h] = last_logit_difference(model, T, clean_answer, corrupt_answer);
        }

    // the stream into block l at position p: for l = 0 the clean token there
    // (its embedding is the clean run's row), else the corrupted stream into
    // block l with row p the clean run's
    int *tokens = xmalloc(sizeof(int) * T);
    float *stream = xmalloc(sizeof(float) * layer_size);
    for (int l = 0; l < L; l++)
        for (int t = 0; t < T; t++) {
            if (l == 0) {
                memcpy(tokens, corrupt, sizeof(int) * T);
                tokens[t] = clean[t];
                forward_window(model, tokens, T, NULL, 0, NULL);
            } else {
                memcpy(stream, corrupt_run.stream + l * layer_size, sizeof(float) * layer_size);
                memcpy(stream + (long)t * C, clean_run.stream + l * layer_size + (long)t * C,
                       sizeof(float) * C);
                forward_window(model, corrupt, T, NULL, l, stream);
            }
            p->stream_diff[(long)l * T + t] =
                last_logit_difference(model, T, clean_answer, corrupt_answer);
        }
    free(tokens), free(stream);
    free(clean_run.stream), free(clean_run.att_out), free(corrupt_run.stream);
    return 1;
}

double patching_recovery(const Patching *p, double patched_diff) {
    return (patched_diff - p->corrupt_diff) / (p->clean_diff - p->corrupt_diff);
}

void patching_free(Patching *p) {
    free(p->head_diff);
    free(p->stream_diff);
    memset(p, 0, sizeof *p);
}

void patching_default_pair(const int *candidates, int count, int n, uint64_t seed, int *clean,
                           int *corrupt, int *clean_answer, int *corrupt_answer) {
    // a partial Fisher-Yates shuffle: the first n + 1 of a copy are distinct draws
    int *pool = xmalloc(sizeof(int) * count);
    memcpy(pool, candidates, sizeof(int) * count);
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i <= n; i++) {
        int j = i + (int)rng_below(&rng, (uint64_t)(count - i));
        int t = pool[i];
        pool[i] = pool[j];
        pool[j] = t;
    }
    for (int i = 0; i < n; i++) clean[i] = pool[i];
    for (int i = 0; i + 1 < n; i++) clean[n + i] = pool[i];
    memcpy(corrupt, clean, sizeof(int) * (2 * n - 1));
    corrupt[n - 1] = pool[n];
    *clean_answer = pool[n - 1];
    *corrupt_answer = pool[n];
    free(pool);
}
