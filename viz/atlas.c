// atlas.c: at each snapshot of a training run, the snapshot written and the
// atlas's CSV files and pictures rebuilt from the snapshots (snapshot.h,
// atlas_charts.h).
#include "atlas.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/util.h"
#include "../infer/checkpoint.h"
#include "../interpret/induction_measures.h"

// ---- atlas_snapshot

// n numbers separated by commas from the start of line, an empty field
// NAN, into field: the end of the last (a comma or the line's end), or
// NULL when a field is not a number or the line ends first.
static const char *csv_numbers(const char *line, double *field, int n) {
    const char *p = line;
    for (int f = 0; f < n; f++) {
        if (f && *p++ != ',') return NULL;
        char *stop = (char *)p;
        field[f] = *p == ',' || !*p ? NAN : strtod(p, &stop);
        p = stop;
        if (*p && *p != ',') return NULL;
    }
    return p;
}

// The snapshots (step, loss, scores only) of a scores.csv written by
// rebuild, those of steps before `before`. A missing file is no snapshot.
static int read_scores_csv(const char *path, int L, int NH, long before, Snapshot **out,
                           int *count, char *err, size_t err_len) {
    *out = NULL;
    *count = 0;
    if (!file_exists(path)) return 1;
    size_t len;
    char *text = read_whole_file(path, &len);
    Snapshot *list = NULL;
    int n = 0, capacity = 0, ok = 1;
    long line_number = 1;
    char *line = strchr(text, '\n'); // past the header, which must be ours
    if (strncmp(text, "step,loss,layer,head,previous_token,", 36)) ok = 0, line = NULL;
    // a file from before the weights' scores holds the attention's only
    int kept = line && strstr(text, ",copying,") && strstr(text, ",copying,") < line ? NUM_SCORES
                                                                                     : NUM_ATTENTION_SCORES;
    while (ok && line && *++line) {
        line_number++;
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        // step,loss,layer,head, then value,baseline per score, then the type
        double field[4 + 2 * NUM_SCORES];
        const char *after = csv_numbers(line, field, 4 + 2 * kept);
        if (!after || *after != ',') ok = 0; // the type follows
        int layer = ok ? (int)field[2] : 0, head = ok ? (int)field[3] : 0;
        if (ok && (layer < 0 || layer >= L || head < 0 || head >= NH || isnan(field[0]))) ok = 0;
        if (!ok) {
            set_error(err, err_len, "%s:%ld: not a row of this model's scores", path, line_number);
            break;
        }
        long step = (long)field[0];
        if (step < before) {
            if (n == 0 || list[n - 1].step != step) {
                if (n == capacity) {
                    capacity = capacity ? 2 * capacity : 16;
                    Snapshot *grown = realloc(list, sizeof *list * capacity);
                    if (!grown) die("out of memory");
                    list = grown;
                }
                memset(&list[n], 0, sizeof list[n]);
                list[n].step = step;
                list[n].loss = field[1];
                list[n].icl = list[n].sink_rate = list[n].sink_uniform = NAN;
                list[n].scores = xcalloc((size_t)L * NH, sizeof(HeadScores));
                for (int h = 0; h < L * NH; h++)
                    for (int k = 0; k < NUM_SCORES; k++)
                        list[n].scores[h].value[k] = list[n].scores[h].uniform[k] = NAN;
                n++;
            }
            HeadScores *s = &list[n - 1].scores[layer * NH + head];
            for (int k = 0; k < kept; k++) {
                s->value[k] = field[4 + 2 * k];
                s->uniform[k] = field[5 + 2 * k];
            }
        }
        line = end;
    }
    free(text);
    if (!ok && line_number == 1) set_error(err, err_len, "%s: not a scores file", path);
    if (!ok) {
        for (int i = 0; i < n; i++) snapshot_free(&list[i]);
        free(list);
        return 0;
    }
    *out = list;
    *count = n;
    return 1;
}

// The same from the snapshots themselves (those of this model's shape),
// for when scores.csv cannot be read (another model's, or edited).
static void scores_from_snapshots(const char *attn_dir, int L, int NH, long before,
                                  Snapshot **out, int *count) {
    long *steps;
    int n, kept = 0;
    char err[512];
    *out = NULL;
    *count = 0;
    if (!snapshot_steps(attn_dir, &steps, &n, err, sizeof err)) return;
    Snapshot *list = xcalloc((size_t)n + 1, sizeof *list);
    for (int i = 0; i < n && steps[i] < before; i++) {
        if (!snapshot_read(attn_dir, steps[i], L, NH, &list[kept], err, sizeof err)) continue;
        free(list[kept].chars); // keep step, loss and scores
        free(list[kept].attn);
        list[kept].chars = NULL;
        list[kept].attn = NULL;
        list[kept].T = 0;
        kept++;
    }
    free(steps);
    *out = list;
    *count = kept;
}

// ---- the measures beside scores.csv

// The header, then the rows of a CSV written here before whose step is
// below `before` (none when the file is missing or has another header).
static void copy_earlier_rows(const char *path, const char *header, long before, FILE *out) {
    fputs(header, out);
    if (!file_exists(path)) return;
    size_t len, header_len = strlen(header);
    char *text = read_whole_file(path, &len);
    if (len >= header_len && !memcmp(text, header, header_len)) {
        char *line = text + header_len;
        while (*line) {
            char *end = strchr(line, '\n');
            size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
            char *stop;
            long step = strtol(line, &stop, 10);
            if (stop != line && *stop == ',' && step < before) fwrite(line, 1, n, out);
            line += n;
        }
    }
    free(text);
}

#define ICL_HEADER "step,loss,early_position,late_position,early_loss,late_loss,icl_score," \
                   "sink_rate,sink_rate_uniform\n"
#define POSITION_HEADER "step,position,loss\n"
#define COMPOSITION_HEADER "step,from_layer,from_head,to_layer,to_head,k_composition," \
                           "k_composition_random\n"

// One snapshot's model-wide measures (induction_measures.h).
typedef struct {
    int early, late;             // the ICL score's positions
    double icl, sink, sink_uniform;
} ModelMeasures;

static ModelMeasures model_measures(const HeadScores *scores, int H, const double *position_loss,
                                    int positions) {
    ModelMeasures m = {0, 0, NAN, 0, 0};
    for (int h = 0; h < H; h++) {
        m.sink += scores[h].value[SCORE_FIRST] > ATTENTION_SINK_WEIGHT;
        m.sink_uniform += scores[h].uniform[SCORE_FIRST] > ATTENTION_SINK_WEIGHT;
    }
    m.sink /= H, m.sink_uniform /= H;
    if (position_loss && positions >= 2) {
        icl_positions(positions, &m.early, &m.late);
        m.icl = position_loss[m.late] - position_loss[m.early];
    }
    return m;
}

typedef struct {
    const char *name, *header;
    FILE *file;
    AtomicFile af;
} MeasureFile;

// icl.csv, position_loss.csv and composition.csv: the rows before this
// step, then this step's.
static int write_measures(const char *attn_dir, int L, int NH, long step, float loss,
                          const HeadScores *scores, const double *k_table,
                          const double *position_loss, int positions, char *err, size_t err_len) {
    MeasureFile files[3] = {{"icl.csv", ICL_HEADER, NULL, {0}},
                            {"position_loss.csv", POSITION_HEADER, NULL, {0}},
                            {"composition.csv", COMPOSITION_HEADER, NULL, {0}}};
    int H = L * NH, ok = 1;
    char path[4400];
    for (int f = 0; ok && f < 3; f++) {
        snprintf(path, sizeof path, "%s/%s", attn_dir, files[f].name);
        ok = atomic_file_open(&files[f].af, path, err, err_len);
        if (!ok) break;
        files[f].file = files[f].af.file;
        copy_earlier_rows(path, files[f].header, step, files[f].file);
    }
    if (!ok) {
        for (int f = 0; f < 3 && files[f].file; f++) atomic_file_abort(&files[f].af);
        return 0;
    }
    ModelMeasures m = model_measures(scores, H, position_loss, positions);
    fprintf(files[0].file, "%ld,%.6f,", step, (double)loss);
    if (isnan(m.icl)) fprintf(files[0].file, ",,,,");
    else fprintf(files[0].file, "%d,%d,%.6f,%.6f,%.6f", m.early, m.late, position_loss[m.early],
                 position_loss[m.late], m.icl);
    fprintf(files[0].file, ",%.4f,%.4f\n", m.sink, m.sink_uniform);
    for (int i = 0; i < positions && position_loss; i++)
        fprintf(files[1].file, "%ld,%d,%.6f\n", step, i, position_loss[i]);
    for (int from = 0; from < H; from++)
        for (int to = 0; to < H; to++)
            if (!isnan(k_table[(size_t)from * H + to]))
                fprintf(files[2].file, "%ld,%d,%d,%d,%d,%.6f,%.6f\n", step, from / NH, from % NH,
                        to / NH, to % NH, k_table[(size_t)from * H + to],
                        scores[to].uniform[SCORE_K_COMPOSITION]);
    for (int f = 0; f < 3; f++) {
        if (ferror(files[f].file)) atomic_file_write_failed(&files[f].af);
        if (ok) ok = atomic_file_commit(&files[f].af, err, err_len);
        else atomic_file_abort(&files[f].af);
    }
    return ok;
}

void snapshots_read_measures(const char *attn_dir, Snapshot *snaps, int count) {
    char path[4400];
    snprintf(path, sizeof path, "%s/icl.csv", attn_dir);
    if (!file_exists(path)) return;
    size_t len;
    char *text = read_whole_file(path, &len), *line = strchr(text, '\n');
    while (line && *++line) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        double field[9];
        const char *after = csv_numbers(line, field, 9);
        for (int i = 0; after && !*after && i < count; i++)
            if (snaps[i].step == (long)field[0]) {
                snaps[i].icl = field[6];
                snaps[i].sink_rate = field[7];
                snaps[i].sink_uniform = field[8];
            }
        line = end;
    }
    free(text);
}

// ---- atlas_snapshot

// timeline.png, phase_change.png and the filmstrips of count snapshots
// (step, loss, scores, ICL), reading the filmstrips' frames whole.
static int draw_pictures(const char *attn_dir, const Snapshot *snaps, int count, int L, int NH,
                         char *err, size_t err_len) {
    char path[4400];
    Image image;
    timeline_render(&image, snaps, count, L, NH);
    snprintf(path, sizeof path, "%s/timeline.png", attn_dir);
    int ok = image_write_png(&image, path, err, err_len);
    image_free(&image);
    if (ok) {
        phase_change_render(&image, snaps, count, L, NH);
        snprintf(path, sizeof path, "%s/phase_change.png", attn_dir);
        ok = image_write_png(&image, path, err, err_len);
        image_free(&image);
    }
    // the filmstrips' frames: up to FILMSTRIP_MAX_FRAMES snapshots, read whole
    int chosen[FILMSTRIP_MAX_FRAMES], n = spread_evenly(count, FILMSTRIP_MAX_FRAMES, chosen);
    Snapshot frames[FILMSTRIP_MAX_FRAMES];
    int frame_count = 0;
    for (int f = 0; ok && f < n; f++) {
        ok = snapshot_read(attn_dir, snaps[chosen[f]].step, L, NH, &frames[frame_count], err, err_len);
        if (ok) frame_count++;
    }
    // png_batch_size() filmstrips at a time, encoded together
    int batch = png_batch_size();
    Image *strips = xcalloc((size_t)batch, sizeof(Image));
    char **paths = xcalloc((size_t)batch, sizeof(char *));
    for (int h0 = 0; ok && h0 < L * NH; h0 += batch) {
        int held = L * NH - h0 < batch ? L * NH - h0 : batch;
        for (int i = 0; i < held; i++) {
            int h = h0 + i;
            filmstrip_render(&strips[i], frames, frame_count, count, NH, h / NH, h % NH);
            paths[i] = xmalloc(4400);
            snprintf(paths[i], 4400, "%s/filmstrip_layer%d_head%d.png", attn_dir, h / NH, h % NH);
        }
        ok = images_write_png(strips, paths, held, err, err_len) == held;
        for (int i = 0; i < held; i++) {
            image_free(&strips[i]);
            free(paths[i]);
        }
    }
    free(strips);
    free(paths);
    for (int f = 0; f < frame_count; f++) snapshot_free(&frames[f]);
    return ok;
}

// The snapshots of scores.csv before `before` (or of the snapshot files
// themselves, when scores.csv cannot be read).
static void read_snapshots(const char *attn_dir, int L, int NH, long before, Snapshot **snaps,
                           int *count) {
    char path[4400], err[512];
    snprintf(path, sizeof path, "%s/scores.csv", attn_dir);
    if (!read_scores_csv(path, L, NH, before, snaps, count, err, sizeof err))
        scores_from_snapshots(attn_dir, L, NH, before, snaps, count);
}

// scores.csv and the measures' CSVs with this snapshot (its step, loss and
// scores) last, and when redraw is set the pictures.
static int rebuild(const char *attn_dir, int L, int NH, long step, float loss,
                   const HeadScores *scores, const double *k_table, const double *position_loss,
                   int positions, int redraw, char *err, size_t err_len) {
    char path[4400];
    snprintf(path, sizeof path, "%s/scores.csv", attn_dir);
    Snapshot *snaps;
    int count;
    read_snapshots(attn_dir, L, NH, step, &snaps, &count);
    Snapshot *grown = realloc(snaps, sizeof *snaps * (count + 1));
    if (!grown) die("out of memory");
    snaps = grown;
    memset(&snaps[count], 0, sizeof snaps[count]);
    snaps[count].step = step;
    snaps[count].loss = loss;
    snaps[count].icl = snaps[count].sink_rate = snaps[count].sink_uniform = NAN;
    snaps[count].scores = xmalloc(sizeof(HeadScores) * L * NH);
    memcpy(snaps[count].scores, scores, sizeof(HeadScores) * L * NH);
    count++;

    AtomicFile af;
    int ok = atomic_file_open(&af, path, err, err_len);
    if (ok) {
        scores_write_csv_header(af.file, "step,loss,");
        for (int i = 0; i < count; i++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "%ld,%.6f,", snaps[i].step, snaps[i].loss);
            scores_write_csv_rows(af.file, prefix, snaps[i].scores, L, NH);
        }
        if (ferror(af.file)) atomic_file_write_failed(&af);
        ok = atomic_file_commit(&af, err, err_len);
    }
    if (ok)
        ok = write_measures(attn_dir, L, NH, step, loss, scores, k_table, position_loss, positions,
                            err, err_len);
    if (ok && redraw) {
        snapshots_read_measures(attn_dir, snaps, count);
        ok = draw_pictures(attn_dir, snaps, count, L, NH, err, err_len);
    }
    for (int i = 0; i < count; i++) snapshot_free(&snaps[i]);
    free(snaps);
    return ok;
}

int atlas_redraw(const char *out_dir, int L, int NH, char *err, size_t err_len) {
    char attn_dir[4200];
    snprintf(attn_dir, sizeof attn_dir, "%s/attn", out_dir);
    Snapshot *snaps;
    int count;
    read_snapshots(attn_dir, L, NH, LONG_MAX, &snaps, &count);
    int ok = count > 0;
    if (!ok) set_error(err, err_len, "%s: no snapshots", attn_dir);
    if (ok) {
        snapshots_read_measures(attn_dir, snaps, count);
        ok = draw_pictures(attn_dir, snaps, count, L, NH, err, err_len);
    }
    for (int i = 0; i < count; i++) snapshot_free(&snaps[i]);
    free(snaps);
    return ok;
}

// attn/induction_probe.txt: the induction probe's characters, as UTF-8
// (no newline added), so that anyone can recompute the score.
static int write_induction_probe(const char *attn_dir, const int *ids, int P,
                                 const uint32_t *code_points, char *err, size_t err_len) {
    char path[4400];
    snprintf(path, sizeof path, "%s/induction_probe.txt", attn_dir);
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) return 0;
    for (int i = 0; i < P; i++) {
        char bytes[4];
        fwrite(bytes, 1, utf8_encode(code_points[ids[i]], bytes), af.file);
    }
    if (ferror(af.file)) atomic_file_write_failed(&af);
    return atomic_file_commit(&af, err, err_len);
}

// The model's weights as they are at this step, ATTN/step_N/model.safetensors,
// a checkpoint as bin/train's (bin/explore replays a text through them).
static int save_snapshot_weights(const char *attn_dir, const GPT *model, long step,
                                 const uint32_t *code_points, char *err, size_t err_len) {
    char path[4400];
    snprintf(path, sizeof path, "%s/step_%ld/model.safetensors", attn_dir, step);
    Vocab vocab;
    if (!vocab_from_ids(&vocab, code_points, model->config.vocab_size, err, err_len)) return 0;
    int ok = gpt_save(path, model, &vocab, err, err_len);
    vocab_free(&vocab);
    return ok;
}

int atlas_snapshot(const char *out_dir, GPT *model, const SnapshotInput *in, char *err,
                   size_t err_len) {
    const uint32_t *chars = in->chars;
    const double *position_loss = in->position_loss;
    int T = in->T, positions = in->positions;
    long step = in->step;
    float loss = in->loss;
    int L = model->config.layers, NH = model->config.heads, H = L * NH;
    HeadScores *scores = xmalloc(sizeof(HeadScores) * H);
    int *ids = xmalloc(sizeof(int) * (T > model->seq_len ? T : model->seq_len));
    for (int i = 0; i < T; i++) ids[i] = (int)chars[i]; // scores compare characters only
    for (int h = 0; h < H; h++)
        head_scores(gpt_attention_probs(model, h / NH, h % NH, 0), ids, T, &scores[h]);
    double *k_table = xmalloc(sizeof(double) * H * H);
    weight_head_scores(model, in->k_random, scores, k_table);
    char attn_dir[4200], path[4400];
    snprintf(attn_dir, sizeof attn_dir, "%s/attn", out_dir);
    snprintf(path, sizeof path, "%s/step_%ld", attn_dir, step);
    ensure_dir(attn_dir);
    ensure_dir(path);
    snprintf(path, sizeof path, "%s/step_%ld/atlas.safetensors", attn_dir, step);
    // the probe's attention, kept before the induction forward replaces it
    size_t per_head = (size_t)T * T;
    float *attn = xmalloc((size_t)H * per_head * sizeof(float));
    for (int h = 0; h < H; h++)
        memcpy(attn + h * per_head, gpt_attention_probs(model, h / NH, h % NH, 0),
               per_head * sizeof(float));
    int P = induction_probe(model->config.vocab_size, model->seq_len, ids);
    if (P >= 2) {
        gpt_forward(model, ids, 1, P, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
        for (int h = 0; h < H; h++)
            head_induction(gpt_attention_probs(model, h / NH, h % NH, 0), ids, P,
                           &scores[h].value[SCORE_INDUCTION], &scores[h].uniform[SCORE_INDUCTION]);
    } else {
        for (int h = 0; h < H; h++)
            scores[h].value[SCORE_INDUCTION] = scores[h].uniform[SCORE_INDUCTION] = NAN;
    }
    int ok = write_snapshot(path, L, NH, attn, chars, T, scores, k_table, position_loss, positions,
                            step, loss, err, err_len);
    free(attn);
    if (ok) ok = save_snapshot_weights(attn_dir, model, step, in->code_points, err, err_len);
    if (ok && P >= 2) ok = write_induction_probe(attn_dir, ids, P, in->code_points, err, err_len);
    if (ok)
        ok = rebuild(attn_dir, L, NH, step, loss, scores, k_table, position_loss, positions,
                     in->redraw, err, err_len);
    free(k_table);
    free(ids);
    free(scores);
    return ok;
}

