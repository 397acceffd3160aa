// atlas.c: training snapshots of every head (written, read back), and the
// timeline, scores CSV and filmstrips made from them.
#include "atlas.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/files.h"
#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../base/safetensors.h"
#include "font.h"
#include "heatmap.h"
#include "induction_measures.h"

// ---- one snapshot

// attn (L, NH, T, T): the probe's attention; k_table (L*NH, L*NH) every
// pair's K-composition; position_loss (positions) or NULL.
static int write_snapshot(const char *path, int L, int NH, const float *attn,
                          const uint32_t *chars, int T, const HeadScores *scores,
                          const double *k_table, const double *position_loss, int positions,
                          long step, float loss, char *err, size_t err_len) {
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

// ---- the timeline

#define PAD 8
#define PANEL_W 240
#define PANEL_H 100
#define PANEL_GAP_X 64  // room for the next panel's y labels
#define PANEL_GAP_Y 52  // room for the x labels and the next panel's title
#define PANEL_LEFT 48   // the first column's y labels
#define TITLE_LINE (FONT_H * 2 + 10)
#define PANEL_TITLE (FONT_H + 8)

// A layer's heads in colours of distinct hue (matplotlib's tab10; past 10
// heads, its lighter tab20 partners).
static const uint8_t palette[20][3] = {
    {31, 119, 180},  {255, 127, 14},  {44, 160, 44},   {214, 39, 40},   {148, 103, 189},
    {140, 86, 75},   {227, 119, 194}, {127, 127, 127}, {188, 189, 34},  {23, 190, 207},
    {174, 199, 232}, {255, 187, 120}, {152, 223, 138}, {255, 152, 150}, {197, 176, 213},
    {196, 156, 148}, {247, 182, 210}, {199, 199, 199}, {219, 219, 141}, {158, 218, 229}};
static const uint8_t GRID[3] = {225, 225, 225};
// The model's own lines (its loss, ICL score, sink rate): a colour no head has.
static const uint8_t MODEL_LINE[3] = {40, 40, 40};

// Ticks at round values: the first multiple of *step at or above lo, *step
// being 1, 2 or 5 times a power of ten giving at most `most` ticks in lo..hi.
static double nice_ticks(double lo, double hi, int most, double *step) {
    double span = hi > lo ? hi - lo : 1, raw = span / most, unit = pow(10, floor(log10(raw)));
    *step = raw <= unit ? unit : raw <= 2 * unit ? 2 * unit : raw <= 5 * unit ? 5 * unit : 10 * unit;
    return ceil(lo / *step - 1e-9) * *step;
}

// "0.25", "1.5e+03" trimmed: a tick's value as short as it reads.
static void tick_text(double v, double step, char *out, size_t len) {
    if (fabs(v) < step * 1e-6) v = 0;
    snprintf(out, len, "%.4g", v);
}

typedef struct {
    int x0, y0;          // the frame's top-left
    double lo, hi;       // the y range
    long s0, s1;         // the step range
    int w, h;            // the frame's size
} Panel;

static int panel_x(const Panel *p, long step) {
    return p->x0 + (p->s1 > p->s0 ? (int)lrint((double)(step - p->s0) / (p->s1 - p->s0) * (p->w - 1))
                                  : p->w / 2);
}
static int panel_y(const Panel *p, double v) {
    return p->y0 + p->h - 1 - (int)lrint((v - p->lo) / (p->hi - p->lo) * (p->h - 1));
}

// The frame, its title, grid lines and labels at round values on both axes.
static void draw_axes(Image *image, const Panel *p, const char *title) {
    draw_text(image, title, p->x0, p->y0 - PANEL_TITLE, 1);
    char text[32];
    double step, v = nice_ticks(p->lo, p->hi, 4, &step);
    for (; v <= p->hi + step * 1e-6; v += step) {
        int y = panel_y(p, v);
        fill_rect(image, p->x0, y, p->w, 1, GRID);
        fill_rect(image, p->x0 - 4, y, 4, 1, FRAME);
        tick_text(v, step, text, sizeof text);
        draw_text(image, text, p->x0 - 6 - font_text_width((int)strlen(text), 1), y - 3, 1);
    }
    double first = nice_ticks((double)p->s0, (double)p->s1, 4, &step);
    for (v = first; v <= p->s1 + step * 1e-6; v += step) {
        int x = panel_x(p, (long)llrint(v));
        fill_rect(image, x, p->y0, 1, p->h, GRID);
        fill_rect(image, x, p->y0 + p->h, 1, 4, FRAME);
        snprintf(text, sizeof text, "%ld", (long)llrint(v));
        draw_text(image, text, x - font_text_width((int)strlen(text), 1) / 2, p->y0 + p->h + 6, 1);
    }
    draw_frame(image, p->x0, p->y0, p->w, p->h);
}

// A series over the snapshots, two pixels thick (a dot when there is one).
static void draw_series(Image *image, const Panel *p, const Snapshot *snaps, int count,
                        const double *v, const uint8_t rgb[3]) {
    for (int i = 0; i < count; i++) {
        if (isnan(v[i])) continue;
        int x = panel_x(p, snaps[i].step), y = panel_y(p, v[i]);
        if (count == 1) fill_rect(image, x - 1, y - 1, 3, 3, rgb);
        if (i + 1 < count && !isnan(v[i + 1]))
            for (int t = 0; t < 2; t++)
                draw_line(image, x, y + t, panel_x(p, snaps[i + 1].step), panel_y(p, v[i + 1]) + t, rgb);
    }
}

// Uniform attention's value, dashed grey.
static void draw_baseline(Image *image, const Panel *p, const Snapshot *snaps, int count,
                          const double *baseline) {
    static const uint8_t grey[3] = {150, 150, 150};
    for (int i = 0; i + 1 < count; i++) {
        if (isnan(baseline[i]) || isnan(baseline[i + 1])) continue;
        int xa = panel_x(p, snaps[i].step), xb = panel_x(p, snaps[i + 1].step);
        int ya = panel_y(p, baseline[i]), yb = panel_y(p, baseline[i + 1]);
        for (int x = xa; x <= xb; x++)
            if ((x / 4) % 2 == 0) put_pixel(image, x, xb > xa ? ya + (yb - ya) * (x - xa) / (xb - xa) : ya, grey);
    }
}

// Small multiples: a row per score, a column per layer, a line per head of
// the layer in its own colour (the same head number, the same colour, in
// every panel); the loss alone on the first row, with the legend.
// The title, then the legend: two lines and the heads' colours, 8 a row.
static int timeline_header(int NH) {
    return TITLE_LINE + 2 * (FONT_H + 4) + (NH + 7) / 8 * (FONT_H + 5) + 8;
}

// At least three columns: the first row's three panels (loss, ICL, sink).
static void timeline_size(int L, int NH, int *width, int *height) {
    int columns = L > 3 ? L : 3;
    *width = PAD + PANEL_LEFT + columns * (PANEL_W + PANEL_GAP_X) + PAD;
    *height = PAD + timeline_header(NH) + (NUM_SCORES + 1) * (PANEL_TITLE + PANEL_H + PANEL_GAP_Y) + PAD;
}

static Panel panel_at(int row, int column, double lo, double hi, const Snapshot *snaps, int count,
                      int NH) {
    Panel p = {PAD + PANEL_LEFT + column * (PANEL_W + PANEL_GAP_X),
               PAD + timeline_header(NH) + PANEL_TITLE + row * (PANEL_TITLE + PANEL_H + PANEL_GAP_Y),
               lo, hi, snaps[0].step, snaps[count - 1].step, PANEL_W, PANEL_H};
    if (!(p.hi > p.lo)) p.hi = p.lo + 1;
    return p;
}

void timeline_render(Image *image, const Snapshot *snaps, int count, int L, int NH) {
    int width, height;
    timeline_size(L, NH, &width, &height);
    image_init(image, width, height);
    char text[160];
    snprintf(text, sizeof text, "head scores on the probe across training (%d snapshot%s), by layer",
             count, count == 1 ? "" : "s");
    draw_text(image, text, PAD, PAD, 2);
    double *series = xmalloc(sizeof(double) * (L * NH + 1) * count), *baseline = series + L * NH * count;
    // the legend under the title
    int lx = PAD, ly = PAD + TITLE_LINE;
    draw_text(image, "each panel of a score: one layer's heads, a line each, against the step; dashed "
              "grey: uniform attention's value,", lx, ly, 1);
    draw_text(image, "or random weights' (copying, k_composition); the first row: the model's loss, "
              "ICL score and attention-sink rate", lx, ly + FONT_H + 4, 1);
    for (int h = 0; h < NH; h++) {
        int x = lx + (h % 8) * 90, y = ly + 2 * (FONT_H + 4) + (h / 8) * (FONT_H + 5);
        fill_rect(image, x, y + 3, 20, 3, palette[h % 20]);
        snprintf(text, sizeof text, "head %d", h);
        draw_text(image, text, x + 24, y, 1);
    }
    // the first row: the loss, the ICL score and the sink rate, one line each
    double lo, hi;
    for (int panel = 0; panel < 3; panel++) {
        lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < count; i++) {
            series[i] = panel == 0 ? snaps[i].loss : panel == 1 ? snaps[i].icl : snaps[i].sink_rate;
            baseline[i] = panel == 1 ? 0.0 : panel == 2 ? snaps[i].sink_uniform : NAN;
            if (!isnan(series[i])) lo = fmin(lo, series[i]), hi = fmax(hi, series[i]);
            if (!isnan(baseline[i])) lo = fmin(lo, baseline[i]), hi = fmax(hi, baseline[i]);
        }
        if (!(lo <= hi)) lo = 0, hi = 1;
        if (panel == 2) lo = 0, hi = 1;
        double margin = panel == 2 ? 0 : (hi - lo) * 0.05 + 1e-3;
        Panel p = panel_at(0, panel, lo - margin, hi + margin, snaps, count, NH);
        draw_axes(image, &p, panel == 0   ? "training loss (the batch at each snapshot)"
                             : panel == 1 ? "ICL score (loss late - early)"
                                          : "attention-sink rate");
        if (panel) draw_baseline(image, &p, snaps, count, baseline);
        draw_series(image, &p, snaps, count, series, MODEL_LINE);
    }
    for (int score = 0; score < NUM_SCORES; score++) {
        // one y range for the row, so a layer's panel compares with the
        // others': from 0 (or the lowest value, the copying score's can be
        // negative) to the largest value or baseline, rounded out to a
        // tenth (to a whole position for the distance)
        lo = 0, hi = 0;
        for (int h = 0; h < L * NH; h++)
            for (int i = 0; i < count; i++) {
                double v = snaps[i].scores[h].value[score], u = snaps[i].scores[h].uniform[score];
                series[h * count + i] = v;
                if (!isnan(v)) lo = fmin(lo, v), hi = fmax(hi, v);
                if (!isnan(u)) hi = fmax(hi, u);
            }
        hi = score == SCORE_DISTANCE ? ceil(hi) : fmin(1.0, ceil(hi * 10 + 1e-9) / 10);
        lo = lo < 0 ? fmax(-1.0, floor(lo * 10 - 1e-9) / 10) : 0;
        if (hi <= lo) hi = lo + 1;
        for (int layer = 0; layer < L; layer++) {
            for (int i = 0; i < count; i++) baseline[i] = snaps[i].scores[layer * NH].uniform[score];
            Panel p = panel_at(1 + score, layer, lo, hi, snaps, count, NH);
            snprintf(text, sizeof text, "%s, layer %d", score_name(score), layer);
            draw_axes(image, &p, text);
            draw_baseline(image, &p, snaps, count, baseline);
            for (int h = 0; h < NH; h++)
                draw_series(image, &p, snaps, count, series + (size_t)(layer * NH + h) * count,
                            palette[h % 20]);
        }
    }
    free(series);
}

// ---- filmstrips

void filmstrip_render(Image *image, const Snapshot *frames, int n, int total, int NH, int layer,
                      int head) {
    int max_T = 1;
    for (int f = 0; f < n; f++) max_T = frames[f].T > max_T ? frames[f].T : max_T;
    int cell = 128 / max_T > 1 ? 128 / max_T : 1, tile = max_T * cell, gap = 10;
    int line = FONT_H + 6, top = PAD + FONT_H * 2 + 8 + 2 * line;
    int width = PAD + n * (tile + gap) + PAD;
    char title[160], shown[200];
    snprintf(title, sizeof title, "layer %d head %d on the probe across training", layer, head);
    if (n < total)
        snprintf(shown, sizeof shown, "%d of the %d snapshots, spread evenly from step %ld to %ld: "
                 "%d left out (a filmstrip holds %d; timeline.png and scores.csv have them all)", n,
                 total, frames[0].step, frames[n - 1].step, total - n, FILMSTRIP_MAX_FRAMES);
    else
        snprintf(shown, sizeof shown, "every snapshot (%d)", n);
    const char *scale = "one fixed colour scale: weight 0 (dark) .. 1 (yellow), viridis; the masked "
                        "future hatched; row: query, column: key";
    int text_w = font_text_width((int)strlen(scale), 1);
    if (font_text_width((int)strlen(shown), 1) > text_w) text_w = font_text_width((int)strlen(shown), 1);
    if (font_text_width((int)strlen(title), 2) > text_w) text_w = font_text_width((int)strlen(title), 2);
    if (width < PAD + text_w + PAD) width = PAD + text_w + PAD;
    image_init(image, width, top + tile + 8 + FONT_H + 4 + FONT_H + PAD);
    draw_text(image, title, PAD, PAD, 2);
    draw_text(image, shown, PAD, PAD + FONT_H * 2 + 6, 1);
    draw_text(image, scale, PAD, PAD + FONT_H * 2 + 6 + line, 1);
    uint8_t rgb[3], viridis[HEATMAP_COLORS][3];
    colormap_table(COLORMAP_VIRIDIS, viridis);
    char text[64];
    for (int f = 0; f < n; f++) {
        const Snapshot *s = &frames[f];
        const float *probs = s->attn + ((size_t)layer * NH + head) * s->T * s->T;
        int x0 = PAD + f * (tile + gap), y0 = top;
        for (int i = 0; i < s->T; i++)
            for (int j = 0; j < s->T; j++)
                for (int y = 0; y < cell; y++)
                    for (int x = 0; x < cell; x++) {
                        int px = x0 + j * cell + x, py = y0 + i * cell + y;
                        if (j > i) mask_rgb(COLORMAP_VIRIDIS, px, py, rgb);
                        else memcpy(rgb, viridis[colormap_index(probs[i * s->T + j])], 3);
                        put_pixel(image, px, py, rgb);
                    }
        draw_frame(image, x0, y0, s->T * cell, s->T * cell);
        snprintf(text, sizeof text, "step %ld", s->step);
        draw_text(image, text, x0, y0 + tile + 6, 1);
        int type = head_dominant_type(&s->scores[layer * NH + head]);
        if (type >= 0) draw_text(image, score_tag(type), x0, y0 + tile + 6 + FONT_H + 2, 1);
    }
}

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

// ---- the phase change

// The first snapshot at which a head's induction score reaches
// INDUCTION_FORMED (-1: none), and that head.
static int induction_formed(const Snapshot *snaps, int count, int heads, int *head) {
    for (int i = 0; i < count; i++)
        for (int h = 0; h < heads; h++)
            if (snaps[i].scores[h].value[SCORE_INDUCTION] >= INDUCTION_FORMED) {
                *head = h;
                return i;
            }
    return -1;
}

// A vertical line at a step, dashed, in every panel.
static void draw_step_marker(Image *image, const Panel *p, long step, const uint8_t rgb[3]) {
    int x = panel_x(p, step);
    for (int y = p->y0; y < p->y0 + p->h; y++)
        if ((y / 3) % 2 == 0) fill_rect(image, x, y, 2, 1, rgb);
}

#define PHASE_W 560
#define PHASE_H 130

void phase_change_render(Image *image, const Snapshot *snaps, int count, int L, int NH) {
    static const uint8_t marker[3] = {214, 39, 40}, grey[3] = {150, 150, 150};
    int H = L * NH, legend_x = PAD + PANEL_LEFT + PHASE_W + 24;
    int rows = 3, row_h = PANEL_TITLE + PHASE_H + PANEL_GAP_Y;
    int width = legend_x + 150 + PAD, height = PAD + 3 * (FONT_H + 6) + rows * row_h + PAD;
    if (height < PAD + 3 * (FONT_H + 6) + PANEL_TITLE + H * (FONT_H + 5) + PAD)
        height = PAD + 3 * (FONT_H + 6) + PANEL_TITLE + H * (FONT_H + 5) + PAD;
    image_init(image, width, height);
    int head = -1, formed = induction_formed(snaps, count, H, &head);
    char text[240];
    draw_text(image, "the phase change, against the step", PAD, PAD, 2);
    if (formed >= 0)
        snprintf(text, sizeof text, "dashed red: the first snapshot with an induction head (score >= %.1f): "
                 "layer %d head %d at step %ld", INDUCTION_FORMED, head / NH, head % NH,
                 snaps[formed].step);
    else
        snprintf(text, sizeof text, "no head's induction score has reached %.1f (%d snapshot%s)",
                 INDUCTION_FORMED, count, count == 1 ? "" : "s");
    draw_text(image, text, PAD, PAD + 2 * FONT_H + 8, 1);
    double *series = xmalloc(sizeof(double) * (H + 1) * count), *baseline = series + H * count;
    for (int row = 0; row < rows; row++) {
        double lo = INFINITY, hi = -INFINITY;
        int lines = row == 2 ? H : 1;
        for (int i = 0; i < count; i++)
            for (int h = 0; h < lines; h++) {
                double v = row == 0 ? snaps[i].loss : row == 1 ? snaps[i].icl
                                                               : snaps[i].scores[h].value[SCORE_INDUCTION];
                series[h * count + i] = v;
                if (!isnan(v)) lo = fmin(lo, v), hi = fmax(hi, v);
            }
        if (row == 1) lo = fmin(lo, 0), hi = fmax(hi, 0); // the ICL score's zero in view
        if (row == 2) {
            lo = 0, hi = fmax(hi, INDUCTION_FORMED + 0.1);
            hi = fmin(1.0, ceil(hi * 10 + 1e-9) / 10);
        }
        if (!(lo <= hi)) lo = 0, hi = 1;
        double margin = row == 2 ? 0 : (hi - lo) * 0.05 + 1e-3;
        Panel p = {PAD + PANEL_LEFT, PAD + 3 * (FONT_H + 6) + PANEL_TITLE + row * row_h, lo - margin,
                   hi + margin, snaps[0].step, snaps[count - 1].step, PHASE_W, PHASE_H};
        if (!(p.hi > p.lo)) p.hi = p.lo + 1;
        const char *title = row == 0 ? "training loss (the batch at each snapshot)"
                            : row == 1 ? "ICL score: validation loss late in the context minus early "
                                         "(below 0: the context helps)"
                                       : "induction score of each head on the probe (dashed grey: "
                                         "uniform attention; dotted: the bar)";
        draw_axes(image, &p, title);
        if (row == 2) {
            for (int i = 0; i < count; i++) baseline[i] = snaps[i].scores[0].uniform[SCORE_INDUCTION];
            draw_baseline(image, &p, snaps, count, baseline);
            int y = panel_y(&p, INDUCTION_FORMED);
            for (int x = p.x0; x < p.x0 + p.w; x += 2) put_pixel(image, x, y, grey);
        }
        for (int h = 0; h < lines; h++)
            draw_series(image, &p, snaps, count, series + (size_t)h * count,
                        row == 2 ? palette[h % 20] : MODEL_LINE);
        if (formed >= 0) draw_step_marker(image, &p, snaps[formed].step, marker);
        if (row == 0) // the heads' colours, down the right of all three panels
            for (int h = 0; h < H; h++) {
                int y = p.y0 + h * (FONT_H + 5);
                fill_rect(image, legend_x, y + 3, 20, 3, palette[h % 20]);
                snprintf(text, sizeof text, "layer %d head %d", h / NH, h % NH);
                draw_text(image, text, legend_x + 24, y, 1);
            }
    }
    free(series);
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
