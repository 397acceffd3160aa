// snapshot.c: one training snapshot of every head, written and read back.
#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/safetensors.h"
#include "../base/util.h"
#include "../data/vocab.h"

// ---- one snapshot

// attn (L, NH, T, T): the probe's attention; k_table (L*NH, L*NH) every
// pair's K-composition; position_loss (positions) or NULL.
int write_snapshot(const char *path, int L, int NH, const float *attn,
                    const uint32_t *chars, int T, const HeadScores *scores,
                    const double *k_table, const double *position_loss, int positions, long step,
                    float loss, char *err, size_t err_len) {
    int H = L * NH;
    float *values = xmalloc(((size_t)H * NUM_SCORES * 2 + (size_t)H * H + positions) * sizeof(float));
    float *k_values = values + H * NUM_SCORES * 2, *loss_values = k_values + H * H;
    for (int h = 0; h < H; h++) {
        for (int k = 0; k < NUM_SCORES; k++) {
            values[(h * NUM_SCORES + k) * 2] = (float)scores[h].value[k];
            values[(h * NUM_SCORES + k) * 2 + 1] = (float)scores[h].uniform[k];
        }
    }
    for (int i = 0; i < H * H; i++) k_values[i] = (float)k_table[i];
    for (int i = 0; i < positions; i++) loss_values[i] = (float)position_loss[i];
    char *text = xmalloc((size_t)T * 4 + 1), step_text[32], loss_text[32];
    size_t n = 0;
    for (int i = 0; i < T; i++) n += utf8_encode(chars[i], text + n);
    text[n] = '\0';
    snprintf(step_text, sizeof step_text, "%ld", step);
    snprintf(loss_text, sizeof loss_text, "%.6f", (double)loss);
    StTensor tensors[4] = {{"attn", attn, 4, {L, NH, T, T}},
                           {"scores", values, 4, {L, NH, NUM_SCORES, 2}},
                           {"k_composition", k_values, 2, {H, H}},
                           {"position_loss", loss_values, 1, {positions}}};
    StMeta meta[] = {{"text", text}, {"step", step_text}, {"loss", loss_text},
                     {"layout", "attn [layer, head, query, key]; scores [layer, head, score, "
                                "(value, baseline)]; k_composition [earlier head, later head] "
                                "(layer * heads + head; NaN unless the first is in an earlier "
                                "layer); position_loss [position]: the mean validation loss"}};
    int ok = safetensors_write(path, tensors, positions > 0 ? 4 : 3, meta, 4, err, err_len);
    free(text);
    free(values);
    return ok;
}

void snapshot_free(Snapshot *s) {
    free(s->chars);
    free(s->attn);
    free(s->scores);
    memset(s, 0, sizeof *s);
}

int snapshot_read(const char *dir, long step, int L, int NH, Snapshot *s, char *err,
                  size_t err_len) {
    memset(s, 0, sizeof *s);
    char path[4400];
    snprintf(path, sizeof path, "%s/step_%ld/atlas.safetensors", dir, step);
    StFile *file = safetensors_open(path, err, err_len);
    if (!file) return 0;
    const char *text = safetensors_meta(file, "text"), *loss = safetensors_meta(file, "loss");
    int ok = text != NULL;
    if (!ok) set_error(err, err_len, "%s: not a training snapshot (no text)", path);
    size_t len = ok ? strlen(text) : 0, pos = 0;
    s->chars = xcalloc(len + 1, sizeof(uint32_t));
    while (ok && pos < len) {
        if (!utf8_decode((const unsigned char *)text, len, &pos, &s->chars[s->T])) {
            set_error(err, err_len, "%s: invalid UTF-8 in its text", path);
            ok = 0;
        }
        s->T++;
    }
    if (ok && s->T < 1) {
        set_error(err, err_len, "%s: empty text", path);
        ok = 0;
    }
    if (ok) {
        s->step = step;
        s->loss = loss ? atof(loss) : NAN;
        // a snapshot from before the weights' scores holds the attention's only
        long attn_shape[4] = {L, NH, s->T, s->T}, score_shape[4] = {L, NH, NUM_SCORES, 2};
        char ignored[256];
        if (!safetensors_check_f32(file, "scores", 4, score_shape, ignored, sizeof ignored))
            score_shape[2] = NUM_ATTENTION_SCORES;
        int kept = (int)score_shape[2];
        s->attn = xmalloc(sizeof(float) * L * NH * s->T * s->T);
        float *values = xmalloc(sizeof(float) * L * NH * kept * 2);
        ok = safetensors_read_f32(file, "attn", 4, attn_shape, s->attn, err, err_len) &&
             safetensors_read_f32(file, "scores", 4, score_shape, values, err, err_len);
        s->scores = xmalloc(sizeof(HeadScores) * L * NH);
        for (int h = 0; ok && h < L * NH; h++)
            for (int k = 0; k < NUM_SCORES; k++) {
                s->scores[h].value[k] = k < kept ? values[(h * kept + k) * 2] : NAN;
                s->scores[h].uniform[k] = k < kept ? values[(h * kept + k) * 2 + 1] : NAN;
            }
        free(values);
        s->icl = s->sink_rate = s->sink_uniform = NAN;
    }
    safetensors_close(file);
    if (!ok) snapshot_free(s);
    return ok;
}

static int by_value(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int snapshot_steps(const char *dir, long **steps, int *count, char *err, size_t err_len) {
    *steps = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        set_error(err, err_len, "%s: cannot read the snapshot folder: %s", dir, strerror(errno));
        return 0;
    }
    long *list = NULL;
    int n = 0, capacity = 0;
    struct dirent *e;
    char path[4400];
    while ((e = readdir(d))) {
        long step;
        int end = 0;
        if (sscanf(e->d_name, "step_%ld%n", &step, &end) != 1 || e->d_name[end]) continue;
        snprintf(path, sizeof path, "%s/%s/atlas.safetensors", dir, e->d_name);
        if (!file_exists(path)) continue;
        if (n == capacity) {
            capacity = capacity ? 2 * capacity : 16;
            long *grown = realloc(list, sizeof *list * capacity);
            if (!grown) die("out of memory");
            list = grown;
        }
        list[n++] = step;
    }
    closedir(d);
    if (n) qsort(list, n, sizeof *list, by_value);
    *steps = list;
    *count = n;
    return 1;
}

int spread_evenly(int count, int max, int *chosen) {
    int n = count < max ? count : max;
    for (int f = 0; f < n; f++) chosen[f] = n == 1 ? count - 1 : (int)((long)f * (count - 1) / (n - 1));
    return n;
}

