// attn_outputs.c: bin/attn's files: each head's heatmap and the overview,
// the scores and circuits, ablation, the logit lens, attribution and
// patching as CSV files and pictures, and the explorer.
#include "attn_outputs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/files.h"
#include "../base/util.h"
#include "../viz/ablation_grid.h"
#include "../viz/attribution_chart.h"
#include "../viz/circuits.h"
#include "../viz/logit_lens.h"
#include "../viz/position_circuit.h"
#include "../viz/score_grid.h"

// The characters the circuit tables show: the whole vocabulary up to
// CIRCUIT_MAX_CHARS, else the most frequent characters of the text (all of
// it, not only the window), in vocabulary order. Returns their count.
#define CIRCUIT_MAX_CHARS 96
static int circuit_ids(const Vocab *vocab, const uint32_t *chars, int n, int *ids) {
    int V = vocab->size;
    if (V <= CIRCUIT_MAX_CHARS) {
        for (int v = 0; v < V; v++) ids[v] = v;
        return V;
    }
    long *count = xcalloc((size_t)V, sizeof(long));
    for (int i = 0; i < n; i++) count[vocab_id(vocab, chars[i])]++;
    int k = 0;
    for (; k < CIRCUIT_MAX_CHARS; k++) { // pick the most frequent left (ties: lower id)
        int best = -1;
        for (int v = 0; v < V; v++)
            if (count[v] > 0 && (best < 0 || count[v] > count[best])) best = v;
        if (best < 0) break;
        ids[k] = best;
        count[best] = 0;
    }
    free(count);
    for (int i = 1; i < k; i++) // vocabulary order
        for (int j = i; j > 0 && ids[j] < ids[j - 1]; j--) {
            int t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    return k;
}

// The folder that holds the checkpoint's training snapshots: path's folder + "/attn".
static char *default_snapshot_dir(const char *ckpt) {
    const char *slash = strrchr(ckpt, '/');
    size_t len = slash ? (size_t)(slash - ckpt) : 1;
    char *dir = xmalloc(len + 6);
    snprintf(dir, len + 6, "%.*s/attn", (int)len, slash ? ckpt : ".");
    return dir;
}

// The scores (table, CSV, pictures) and the circuits.
static void write_scores_and_circuits(const AttnOptions *o, const GPT *model, const Vocab *vocab,
                                      const uint32_t *chars, int num_chars,
                                      const HeadScores *scores) {
    int L = model->config.layers, NH = model->config.heads;
    char err[2048], path[4200];
    scores_print_table(stdout, scores, L, NH);
    snprintf(path, sizeof path, "%s/scores.csv", o->out);
    if (!scores_write_csv(path, scores, L, NH, err, sizeof err)) die("%s", err);
    if (!score_grids_write(o->out, scores, L, NH, err, sizeof err)) die("%s", err);

    snprintf(path, sizeof path, "%s/circuits", o->out);
    ensure_dir(path);
    int *ids = xmalloc(sizeof(int) * (vocab->size < CIRCUIT_MAX_CHARS ? vocab->size : CIRCUIT_MAX_CHARS));
    int n = circuit_ids(vocab, chars, num_chars, ids);
    uint32_t *shown = xmalloc(sizeof(uint32_t) * n);
    for (int i = 0; i < n; i++) shown[i] = vocab->code_points[ids[i]];
    if (!circuits_write(path, model, o->layer, o->head, ids, shown, n, err, sizeof err)) die("%s", err);
    // the positions' path: learned positions' QK table, or RoPE's scores by distance
    int drawn = model->config.pos == POS_ROPE
                    ? distance_circuits_write(path, model, o->layer, o->head, ids, shown, n, err,
                                              sizeof err)
                    : position_circuits_write(path, model, o->layer, o->head, err, sizeof err);
    if (!drawn) die("%s", err);
    printf("wrote %s/scores.csv, %s/score_*.png and %s/circuits/ (%d of %d characters)\n", o->out,
           o->out, o->out, n, vocab->size);
    free(ids);
    free(shown);
}

// Read before anything is written, so that a bad --snapshots leaves the
// output folder as it was. Those of the default folder (the checkpoint's
// folder/attn) that this model cannot read (another run's) are left out
// with a note; with --snapshots every problem is an error.
ExplorerSnapshots read_explorer_snapshots(const AttnOptions *o, const GPT *model) {
    int L = model->config.layers, NH = model->config.heads;
    char err[2048];
    long *steps = NULL;
    int count = 0;
    ExplorerSnapshots shown = {0};
    char *dir = o->snapshots ? strdup(o->snapshots) : default_snapshot_dir(o->ckpt);
    if ((o->snapshots || file_exists(dir)) && !snapshot_steps(dir, &steps, &count, err, sizeof err))
        die("--snapshots: %s", err);
    int chosen[EXPLORER_MAX_SNAPSHOTS], n = spread_evenly(count, EXPLORER_MAX_SNAPSHOTS, chosen);
    shown.snaps = xcalloc((size_t)n + 1, sizeof *shown.snaps);
    for (int v = 0; v < n; v++) {
        if (snapshot_read(dir, steps[chosen[v]], L, NH, &shown.snaps[shown.count], err, sizeof err))
            shown.count++;
        else if (o->snapshots)
            die("--snapshots: %s", err);
        else
            fprintf(stderr, "note: training snapshot left out: %s\n", err);
    }
    snapshots_read_measures(dir, shown.snaps, shown.count);
    free(dir);
    free(steps);
    return shown;
}

void free_explorer_snapshots(ExplorerSnapshots *shown) {
    for (int v = 0; v < shown->count; v++) snapshot_free(&shown->snaps[v]);
    free(shown->snaps);
    memset(shown, 0, sizeof *shown);
}

// The attention of the model's last forward (batch row 0, T positions),
// (L, NH, T, T): the text's, for the explorer, kept before the analyses
// run other forwards.
float *text_attention(const GPT *model, int T) {
    int L = model->config.layers, NH = model->config.heads;
    size_t per_head = (size_t)T * T;
    float *attn = xmalloc(sizeof(float) * L * NH * per_head);
    for (int h = 0; h < L * NH; h++)
        memcpy(attn + h * per_head, gpt_attention_probs(model, h / NH, h % NH, 0), per_head * sizeof(float));
    return attn;
}

// The explorer: view 0 is this text (attn, its attention), then the
// training snapshots; the analyses' views when there are any.
void write_explorer(const AttnOptions *o, const GPT *model, const uint32_t *window, int T,
                    const float *attn, const HeadScores *scores,
                    const ExplorerSnapshots *shown, const ExplorerAnalyses *analyses) {
    int L = model->config.layers, NH = model->config.heads;
    char err[2048], path[4200];
    ExplorerView *views = xcalloc((size_t)shown->count + 1, sizeof *views);
    char (*labels)[48] = xcalloc((size_t)shown->count + 1, sizeof *labels);
    views[0] = (ExplorerView){"your text", -1, NAN, T, window, attn, scores, NAN, NAN};
    for (int v = 0; v < shown->count; v++) {
        const Snapshot *s = &shown->snaps[v];
        snprintf(labels[v + 1], sizeof labels[v + 1], "step %ld", s->step);
        views[v + 1] = (ExplorerView){labels[v + 1], s->step, s->loss, s->T, s->chars, s->attn,
                                      s->scores, s->icl, s->sink_rate};
    }
    snprintf(path, sizeof path, "%s/index.html", o->out);
    if (!explorer_write(path, L, NH, views, shown->count + 1, analyses, err, sizeof err))
        die("%s", err);
    printf("wrote %s (%d training snapshot%s)\n", path, shown->count, shown->count == 1 ? "" : "s");
    free(labels);
    free(views);
}

// The pictures: a heatmap per head and the overview, each head tagged with
// its type, then the scores and the circuits.
void write_pictures(const AttnOptions *o, const GPT *model, const Vocab *vocab,
                    const AttnText *text, const HeatmapOptions *heatmap,
                    const HeadScores *scores) {
    char err[2048];
    int L = model->config.layers, NH = model->config.heads;
    const char **tags = xcalloc((size_t)L * NH, sizeof(char *));
    for (int h = 0; h < L * NH; h++) {
        int type = head_dominant_type(&scores[h]);
        tags[h] = type >= 0 ? score_tag(type) : NULL;
    }
    HeatmapOptions tagged = *heatmap;
    tagged.tags = tags;
    if (!heatmaps_write(o->out, model, text->window, text->T, &tagged, err, sizeof err))
        die("%s", err);
    int images = (o->layer >= 0 ? 1 : L) * (o->head >= 0 ? 1 : NH);
    printf("%d characters: wrote %s/overview.png and %d head image%s%s\n", text->T, o->out, images,
           images == 1 ? "" : "s", o->raw ? " and attention.safetensors" : "");
    write_scores_and_circuits(o, model, vocab, text->chars, text->num_chars, scores);
    free(tags);
}

// ---- the analyses: ablation, the logit lens, attribution

// A CSV file written atomically; dies with a one-line message.
static void csv_commit(AtomicFile *af) {
    char err[2048];
    if (ferror(af->file)) atomic_file_write_failed(af);
    if (!atomic_file_commit(af, err, sizeof err)) die("%s", err);
}

static void csv_open(AtomicFile *af, const char *out, const char *name) {
    char path[4200], err[2048];
    snprintf(path, sizeof path, "%s/%s", out, name);
    if (!atomic_file_open(af, path, err, sizeof err)) die("%s", err);
}

// The heads shown in the ablation picture's strip: the (up to) 3 whose mean
// ablation raises the loss most (the lower unit first on a tie).
#define ABLATION_STRIPS 3
static int strongest_heads(const GPTConfig *cfg, const double *mean_loss, int *units) {
    int heads = cfg->layers * cfg->heads, n = heads < ABLATION_STRIPS ? heads : ABLATION_STRIPS;
    for (int k = 0; k < n; k++) {
        int best = -1;
        for (int u = 0; u < heads; u++) {
            int taken = 0;
            for (int j = 0; j < k; j++) taken |= units[j] == u;
            if (!taken && (best < 0 || mean_loss[u] > mean_loss[best])) best = u;
        }
        units[k] = best;
    }
    return n;
}

// OUT/ablation.csv (a row per head, then per layer "attn" and "mlp") and
// OUT/ablation.png. The means come from the windows averaged over.

void free_findings(Findings *f, int T) {
    for (int t = 0; f->attributions && t < T; t++) attribution_free(&f->attributions[t]);
    free(f->attributions), free(f->lens), free(f->zero_loss), free(f->mean_loss);
    free(f->zero_frozen_loss), free(f->mean_frozen_loss);
    memset(f, 0, sizeof *f);
}

// ablation_losses (or with `freeze` frozen_ablation_losses) over the
// windows ABLATION_CHUNK at a time, a line of progress on stderr after each
// (rewritten in place on a terminal), as training shows its steps: the
// windows of a long text take minutes. A chunk is a whole number of the
// model's batches, so every forward is the one a single call would run; the
// means over chunks are recombined by their positions.
#define ABLATION_CHUNK 60
static double ablation_losses_with_progress(GPT *model, const AblationWindows *set,
                                            const float *means, int freeze, double *zero_loss,
                                            double *mean_loss) {
    int W = set->W, T = set->T, units = ablation_units(&model->config);
    double (*losses)(GPT *, const int *, const int *, int, int, const float *, double *,
                     double *) = freeze ? frozen_ablation_losses : ablation_losses;
    if (W <= ABLATION_CHUNK)
        return losses(model, set->tokens, set->targets, W, T, means, zero_loss, mean_loss);
    double *zero_part = xmalloc(sizeof(double) * units), *mean_part = xmalloc(sizeof(double) * units);
    double clean = 0, start = now_seconds();
    for (int u = 0; u < units; u++) zero_loss[u] = mean_loss[u] = 0;
    int live = isatty(STDERR_FILENO);
    for (int w0 = 0; w0 < W; w0 += ABLATION_CHUNK) {
        int n = W - w0 < ABLATION_CHUNK ? W - w0 : ABLATION_CHUNK;
        long at = (long)w0 * T;
        double positions = (double)n * T;
        clean += positions * losses(model, set->tokens + at, set->targets + at, n, T, means,
                                    zero_part, mean_part);
        for (int u = 0; u < units; u++) {
            zero_loss[u] += positions * zero_part[u];
            mean_loss[u] += positions * mean_part[u];
        }
        double elapsed = now_seconds() - start, done = (double)(w0 + n) / W;
        fprintf(stderr, "%sablation%s: %d of %d windows, %.0f s, about %.0f s left%s",
                live ? "\r" : "", freeze ? " with patterns frozen" : "", w0 + n, W, elapsed,
                elapsed * (1 - done) / done,
                live && w0 + n < W ? "" : "\n");
        fflush(stderr);
    }
    double positions = (double)W * T;
    for (int u = 0; u < units; u++) zero_loss[u] /= positions, mean_loss[u] /= positions;
    free(zero_part), free(mean_part);
    return clean / positions;
}

// Each head's mean ablation, total and with the later patterns frozen, as a
// table on stdout.
static void print_frozen_ablation(const GPTConfig *cfg, double loss, const double *mean_loss,
                                  const double *mean_frozen) {
    printf("mean ablation, loss increase: total (the heads above attending as they now do) and "
           "with the later patterns frozen (attending as in the unchanged run)\n");
    printf("%-16s %10s %10s %10s\n", "", "total", "frozen", "through patterns");
    for (int u = 0; u < cfg->layers * cfg->heads; u++) {
        char name[48];
        snprintf(name, sizeof name, "layer %d head %d", u / cfg->heads, u % cfg->heads);
        printf("%-16s %+10.4f %+10.4f %+10.4f\n", name, mean_loss[u] - loss,
               mean_frozen[u] - loss, mean_loss[u] - mean_frozen[u]);
    }
}

void write_ablation(const AttnOptions *o, GPT *model, const PredictionWindow *window,
                    const AblationWindows *set, Findings *found) {
    const GPTConfig *cfg = &model->config;
    int L = cfg->layers, NH = cfg->heads, units = ablation_units(cfg);
    int T = set->T > window->T ? set->T : window->T;
    gpt_alloc_inference(model, set->W < 12 ? set->W : 12, T);
    float *means = ablation_means(model, set->tokens, set->W, set->T);
    double *zero_loss = xmalloc(sizeof(double) * units);
    double *mean_loss = xmalloc(sizeof(double) * units);
    double loss = ablation_losses_with_progress(model, set, means, 0, zero_loss, mean_loss);
    double *zero_frozen = NULL, *mean_frozen = NULL;
    if (o->freeze_patterns) {
        zero_frozen = xmalloc(sizeof(double) * units);
        mean_frozen = xmalloc(sizeof(double) * units);
        ablation_losses_with_progress(model, set, means, 1, zero_frozen, mean_frozen);
    }
    AtomicFile af;
    csv_open(&af, o->out, "ablation.csv");
    fprintf(af.file, "layer,head,loss,zero_ablated_loss,mean_ablated_loss%s\n",
            zero_frozen ? ",zero_ablated_frozen_loss,mean_ablated_frozen_loss" : "");
    for (int l = 0; l < L; l++)
        for (int c = 0; c < NH + 2; c++) {
            int u = c < NH ? l * NH + c : L * NH + 2 * l + (c - NH);
            char head[16];
            if (c < NH) snprintf(head, sizeof head, "%d", c);
            else snprintf(head, sizeof head, "%s", c == NH ? "attn" : "mlp");
            fprintf(af.file, "%d,%s,%.6f,%.6f,%.6f", l, head, loss, zero_loss[u], mean_loss[u]);
            if (zero_frozen) fprintf(af.file, ",%.6f,%.6f", zero_frozen[u], mean_frozen[u]);
            fputc('\n', af.file);
        }
    csv_commit(&af);
    if (zero_frozen) print_frozen_ablation(cfg, loss, mean_loss, mean_frozen);

    // the strip: the prediction window, each of the strongest heads mean-ablated
    int strip_units[ABLATION_STRIPS], strips = strongest_heads(cfg, mean_loss, strip_units);
    float *clean = xmalloc(sizeof(float) * window->T);
    float *increase = xmalloc(sizeof(float) * strips * window->T);
    ablated_loss(model, window->tokens, window->targets, 1, window->T, 0, ABLATE_NONE, NULL, clean);
    for (int k = 0; k < strips; k++) {
        float *row = increase + (long)k * window->T;
        ablated_loss(model, window->tokens, window->targets, 1, window->T, strip_units[k],
                     ABLATE_MEAN, means, row);
        for (int t = 0; t < window->T; t++) row[t] -= clean[t];
    }
    AblationPicture picture = {L, NH, loss, zero_loss, mean_loss, (long)set->W * set->T, set->W,
                               window->T, window->chars + 1, strips, strip_units, increase};
    char path[4200], err[2048];
    snprintf(path, sizeof path, "%s/ablation.png", o->out);
    if (!ablation_write_png(path, &picture, err, sizeof err)) die("%s", err);
    printf("wrote %s/ablation.csv and ablation.png (%d heads, %d layers' attention and MLP; %d "
           "window%s of %d)\n", o->out, L * NH, L, set->W, set->W == 1 ? "" : "s", set->T);
    found->zero_loss = zero_loss;
    found->mean_loss = mean_loss;
    found->zero_frozen_loss = zero_frozen;
    found->mean_frozen_loss = mean_frozen;
    found->loss = loss;
    found->positions = (long)set->W * set->T;
    found->windows = set->W;
    free(means), free(clean), free(increase);
}

// A character as a CSV field: always quoted (a comma, a quote or a newline
// is a character like any other here), a quote doubled.
static void csv_char(FILE *file, uint32_t cp) {
    char utf8[8];
    int n = utf8_encode(cp, utf8);
    fputc('"', file);
    for (int i = 0; i < n; i++) {
        if (utf8[i] == '"') fputc('"', file);
        fputc(utf8[i], file);
    }
    fputc('"', file);
}

// OUT/logit_lens.csv (a row per depth and position) and OUT/logit_lens.png;
// returns the cells (L+1,T).
LensCell *write_lens(const AttnOptions *o, GPT *model, const Vocab *vocab,
                     const PredictionWindow *window) {
    int L = model->config.layers, T = window->T;
    gpt_alloc_inference(model, 1, T);
    LensCell *cells = xmalloc(sizeof(LensCell) * (L + 1) * T);
    logit_lens(model, window->tokens, window->targets, T, cells);
    AtomicFile af;
    csv_open(&af, o->out, "logit_lens.csv");
    fprintf(af.file,
            "layer,position,char,next_char,predicted_char,predicted_prob,next_char_prob\n");
    for (int d = 0; d <= L; d++)
        for (int t = 0; t < T; t++) {
            const LensCell *c = &cells[d * T + t];
            if (d == 0) fprintf(af.file, "embed,%d,", t);
            else fprintf(af.file, "%d,%d,", d - 1, t);
            csv_char(af.file, window->chars[t]);
            fputc(',', af.file);
            csv_char(af.file, window->chars[t + 1]);
            fputc(',', af.file);
            csv_char(af.file, vocab->code_points[c->top]);
            fprintf(af.file, ",%.6f,%.6f\n", c->top_prob, c->target_prob);
        }
    csv_commit(&af);
    LensPicture picture = {L, T, window->chars, cells, vocab->code_points};
    char path[4200], err[2048];
    snprintf(path, sizeof path, "%s/logit_lens.png", o->out);
    if (!logit_lens_write_png(path, &picture, err, sizeof err)) die("%s", err);
    printf("wrote %s/logit_lens.csv and logit_lens.png (%d positions, %d rows)\n", o->out, T,
           L + 1);
    return cells;
}

// One row of attribution.csv; layer and head -1 when the part has none.
static void attribution_row(FILE *file, int position, uint32_t next, uint32_t other,
                            const char *part, int layer, int head, double value) {
    fprintf(file, "%d,", position);
    csv_char(file, next);
    fputc(',', file);
    csv_char(file, other);
    fprintf(file, ",%s,", part);
    if (layer >= 0) fprintf(file, "%d", layer);
    fputc(',', file);
    if (head >= 0) fprintf(file, "%d", head);
    fprintf(file, ",%.6f\n", value);
}

// OUT/attribution.csv (a row per part, then their sum and the model's
// logit difference) and OUT/attribution.png. Returns the attributions (T):
// with --html every position's, for the explorer; else only P's.
Attribution *write_attribution(const AttnOptions *o, GPT *model, const Vocab *vocab,
                               const PredictionWindow *window) {
    int L = model->config.layers, NH = model->config.heads, P = o->attribute_position;
    gpt_alloc_inference(model, 1, window->T);
    Attribution *all = xcalloc((size_t)window->T, sizeof(Attribution));
    for (int t = 0; t < window->T; t++)
        if (t == P || o->html)
            attribute(model, window->tokens, window->targets, window->T, t, &all[t]);
    Attribution a = all[P];
    uint32_t next = vocab->code_points[a.target], other = vocab->code_points[a.other];
    AtomicFile af;
    csv_open(&af, o->out, "attribution.csv");
    FILE *f = af.file;
    fprintf(f, "position,next_char,other_char,part,layer,head,contribution\n");
    attribution_row(f, P, next, other, "token_embedding", -1, -1, a.token_embedding);
    if (a.position_part) // with RoPE there is no such part (interpret.h), and no row
        attribution_row(f, P, next, other, "position_embedding", -1, -1, a.position_embedding);
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < NH; h++)
            attribution_row(f, P, next, other, "head", l, h, a.heads[l * NH + h]);
        attribution_row(f, P, next, other, "mlp", l, -1, a.mlps[l]);
    }
    attribution_row(f, P, next, other, "rest", -1, -1, a.rest);
    attribution_row(f, P, next, other, "total", -1, -1, attribution_total(&a));
    attribution_row(f, P, next, other, "logit_difference", -1, -1, a.logit_diff);
    if (a.softcap > 0) // what the model outputs; the parts add up to the difference before the cap
        attribution_row(f, P, next, other, "capped_logit_difference", -1, -1, a.capped_logit_diff);
    csv_commit(&af);
    char path[4200], err[2048];
    snprintf(path, sizeof path, "%s/attribution.png", o->out);
    if (!attribution_write_png(path, &a, window->chars[P], next, other, err, sizeof err))
        die("%s", err);
    char capped[64] = "";
    if (a.softcap > 0)
        snprintf(capped, sizeof capped, " before the cap (%.4f after it)", a.capped_logit_diff);
    printf("wrote %s/attribution.csv and attribution.png (position %d: logit difference %.4f%s, "
           "the parts add up to %.4f%s)\n", o->out, P, a.logit_diff, capped, attribution_total(&a),
           a.position_part ? "" : "; RoPE: no position embedding part");
    return all;
}

// One row of patching.csv; layer, head and position -1 when the row has
// none, a character 0 when it has none.
static void patching_row(FILE *file, const char *part, int layer, int head, int position,
                         uint32_t ch, uint32_t corrupted_ch, double diff, double recovery) {
    fprintf(file, "%s,", part);
    if (layer >= 0) fprintf(file, "%d", layer);
    fputc(',', file);
    if (head >= 0) fprintf(file, "%d", head);
    fputc(',', file);
    if (position >= 0) fprintf(file, "%d", position);
    fputc(',', file);
    if (ch) csv_char(file, ch);
    fputc(',', file);
    if (corrupted_ch) csv_char(file, corrupted_ch);
    fprintf(file, ",%.6f,%.6f\n", diff, recovery);
}

// OUT/patching.csv (the two runs, a row per head, then per block and
// position) and OUT/patching.png; the figures on stdout.
void write_patching(const AttnOptions *o, const PatchPair *pair,
                    const PatchingPicture *picture) {
    const Patching *p = &pair->found;
    int L = p->layers, NH = p->heads, T = p->T;
    uint32_t clean_answer = picture->clean_answer, corrupt_answer = picture->corrupt_answer;
    AtomicFile af;
    csv_open(&af, o->out, "patching.csv");
    FILE *f = af.file;
    fprintf(f, "part,layer,head,position,char,corrupted_char,logit_difference,recovery\n");
    patching_row(f, "clean", -1, -1, -1, clean_answer, 0, p->clean_diff, 1);
    patching_row(f, "corrupted", -1, -1, -1, 0, corrupt_answer, p->corrupt_diff, 0);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++) {
            double diff = p->head_diff[l * NH + h];
            patching_row(f, "head", l, h, -1, 0, 0, diff, patching_recovery(p, diff));
        }
    for (int l = 0; l < L; l++)
        for (int t = 0; t < T; t++) {
            double diff = p->stream_diff[(long)l * T + t];
            patching_row(f, "stream", l, -1, t, pair->clean_chars[t], pair->corrupt_chars[t], diff,
                         patching_recovery(p, diff));
        }
    csv_commit(&af);
    char path[4200], err[2048], a[16], b[16];
    snprintf(path, sizeof path, "%s/patching.png", o->out);
    if (!patching_write_png(path, picture, err, sizeof err)) die("%s", err);

    // The recovery measures how much of the way from the corrupted run's LD
    // to the clean run's comes back: it assumes the clean run prefers its
    // answer (LD > 0) and the corrupted run less so.
    if (!(p->clean_diff > 0 && p->clean_diff > p->corrupt_diff))
        fprintf(stderr,
                "warning: --patch: LD is %.4f clean and %.4f corrupted: the clean run does not "
                "prefer '%s' over '%s' more than the corrupted run does, so recoveries say little "
                "(give --clean and --corrupt texts whose next characters differ)\n",
                p->clean_diff, p->corrupt_diff, char_shown(clean_answer, a),
                char_shown(corrupt_answer, b));
    printf("patching: LD = logit('%s') - logit('%s') at the last position, %.4f clean, %.4f "
           "corrupted; recovery (LD patched - LD corrupted) / (LD clean - LD corrupted):\n",
           char_shown(clean_answer, a), char_shown(corrupt_answer, b), p->clean_diff,
           p->corrupt_diff);
    printf("%-8s", "");
    for (int h = 0; h < NH; h++) printf("  head %-3d", h);
    printf("\n");
    for (int l = 0; l < L; l++) {
        printf("layer %-2d", l);
        for (int h = 0; h < NH; h++) printf(" %+8.3f ", patching_recovery(p, p->head_diff[l * NH + h]));
        printf("\n");
    }
    for (int l = 0; l < L; l++) { // the stream's strongest position in each block
        int best = 0;
        for (int t = 1; t < T; t++)
            if (patching_recovery(p, p->stream_diff[(long)l * T + t]) >
                patching_recovery(p, p->stream_diff[(long)l * T + best]))
                best = t;
        printf("stream into block %d: most recovered at position %d '%s', %+.3f\n", l, best,
               char_shown(pair->clean_chars[best], a),
               patching_recovery(p, p->stream_diff[(long)l * T + best]));
    }
    printf("wrote %s/patching.csv and patching.png (%d heads, %d blocks x %d positions)\n", o->out,
           L * NH, L, T);
}
