// snapshot.h: one training snapshot of every head (atlas.h says what it
// holds), read back from OUT/attn/step_N/atlas.safetensors.
#ifndef VIZ_SNAPSHOT_H
#define VIZ_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "scores.h"

typedef struct {
    long step;
    double loss;        // NAN if unknown
    int T;              // 0, chars and attn NULL, when only the scores are read
    uint32_t *chars;    // (T)
    float *attn;        // (L, NH, T, T)
    HeadScores *scores; // (L*NH)
    double icl;         // the ICL score and the sink rate with its uniform
    double sink_rate;   // value (icl.csv), NAN if unknown
    double sink_uniform;
} Snapshot;

// The steps N of every DIR/step_N/atlas.safetensors, in order (*steps is
// allocated; free it). Returns 0 with a message if DIR cannot be read.
int snapshot_steps(const char *dir, long **steps, int *count, char *err, size_t err_len);
// Read DIR/step_N/atlas.safetensors of a model with L layers and NH heads.
// Returns 0 with a message (a missing or malformed file, another shape).
int snapshot_read(const char *dir, long step, int L, int NH, Snapshot *snapshot, char *err,
                  size_t err_len);
void snapshot_free(Snapshot *snapshot);
// Up to max of count items spread evenly from the first to the last
// (all of them when count <= max): their indices in chosen; returns how many.
int spread_evenly(int count, int max, int *chosen);

// Write one snapshot (atlas.h: what atlas_snapshot keeps) at path: attn
// (L, NH, T, T) the probe's attention; k_table (L*NH, L*NH) every pair's
// K-composition; position_loss (positions) or NULL. Returns 0 with a
// message.
int write_snapshot(const char *path, int L, int NH, const float *attn, const uint32_t *chars,
                   int T, const HeadScores *scores, const double *k_table,
                   const double *position_loss, int positions, long step, float loss, char *err,
                   size_t err_len);

#endif
