// progress.h: what a run shows as it goes: the progress line and log.csv
// rows, the evaluation of both splits, a short sample of text after each
// evaluation, and attention heatmaps of a fixed probe text.
#ifndef PROGRESS_H
#define PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "../data/dataset.h"
#include "../infer/sampler.h"
#include "../model/gpt.h"
#include "../infer/kv_cache.h"

typedef struct {
    int *inputs, *targets; // (B,T)
} Batch;

// Mean loss over `batches` fixed batches of a split (the same ones at every
// evaluation, so the figures compare across steps). Each batch of B rows
// is run `rows` at a time (the model's capacity) and its loss summed in the
// order of its positions, so the figure does not depend on `rows`; with
// several processes each takes every R-th batch, and all get the same figure.
float evaluate(GPT *model, Split split, int B, int T, int batches, Batch *batch, int rows);

// Steps since the last log row: their time and losses.
typedef struct {
    double seconds, loss_sum;
    int steps;
} ProgressWindow;

void progress_add_step(ProgressWindow *window, double seconds, float loss);
// The progress line rewritten in place on a terminal. iters 0: not known
// yet (a --minutes run before its plan), shown as "?".
void print_live_progress(const ProgressWindow *window, long step, int iters, float loss, float lr,
                         int tokens_per_step);
// Close the window of steps since the last log row: print the plain
// progress line (when not on a terminal) and write its log.csv row (not on
// eval steps, whose row log_eval_row writes after the evaluation), then
// start a new window. Returns the window's ms per iteration.
float log_window(ProgressWindow *window, FILE *log, long step, int iters, float lr,
                 int tokens_per_step, int print_line, int write_row, float *tokens_per_s);
void log_eval_row(FILE *log, long step, float train_loss, float val_loss, float lr,
                  float ms_per_iter, float tokens_per_s);

// `chars` characters sampled from a newline with a fixed seed, so that only
// the model changes between evaluations.
void print_sample(KVCache *cache, Sampler *sampler, const Vocab *vocab, int chars);

// What a snapshot runs the model on: the probe text (its attention in the
// pictures), and windows of the validation split (the loss at each
// position: the in-context learning score).
#define ICL_WINDOWS 32
typedef struct {
    int *ids;        // (len) the probe's token ids
    uint32_t *chars; // (len) its code points
    int len;
    const uint32_t *code_points; // (V) the vocabulary's characters
    int *icl_inputs, *icl_targets; // (ICL_WINDOWS, context) fixed validation windows
    int context;
    double *position_loss;         // (context) their mean loss at each position
    double k_random;               // K-composition's random baseline, once for the run
    // The pictures redrawn from all snapshots (timeline, phase change,
    // filmstrips): when they were last drawn, what that snapshot took, and
    // whether a snapshot since has left them behind.
    double drawn_at, draw_seconds;
    int drawn, stale;
} Probe;

// The probe: `text`, or the first `context` characters of the validation
// split when text is NULL, and the validation windows. A text with
// characters outside the vocabulary, or longer than the context, is a
// usage error (exit 2).
void make_probe(Probe *probe, const char *text, const Corpus *corpus, int context);
void free_probe(Probe *probe);
// DIR/attn/step_N/: the probe's heatmaps at this step and its snapshot (a
// warning, not an error, when they cannot be written). The pictures drawn
// from every snapshot are redrawn when at least PICTURES_SPACING times
// their last cost has passed since (so they take at most about 1/20 of
// the run), else left stale until finish_heatmaps.
#define PICTURES_SPACING 20
void write_heatmaps(GPT *model, Probe *probe, const char *out, long step);
// At the end of a run: the pictures, when a snapshot left them stale.
void finish_heatmaps(const GPT *model, Probe *probe, const char *out);

#endif
