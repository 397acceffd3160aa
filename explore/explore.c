// explore.c: bin/explore, the model in the page. Writes one self-contained
// HTML file that holds a checkpoint's weights (and its training snapshots'),
// the project's forward compiled to WebAssembly (page/page_model.c, built
// from model/, kernels/, infer/ and interpret/) and the page that drives it
// (page/explore.{html,css,js}): type any text and every head redraws. No
// network request: everything is in the file, and its Content-Security-
// Policy forbids fetching anything.
//
// The page's template (base/page_template.h) holds @STYLE@, @SCRIPT@,
// @DATA@, @MODULE@ and @WEIGHTS@ where the CSS, the JavaScript, the model's
// description (JSON), the module (base64) and the weights (base64
// little-endian float32, one script element a model: the checkpoint, then
// each snapshot) go.
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/base64.h"
#include "../base/files.h"
#include "../base/options.h"
#include "../base/page_template.h"
#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../viz/atlas.h"
#include "../viz/heatmap.h"
#include "../viz/scores.h"

// page/embed.sh's arrays (build/page/assets.c), each followed by a 0.
extern const unsigned char explore_html[], explore_css[], explore_js[], explore_wasm[];
extern const unsigned long explore_html_len, explore_css_len, explore_js_len, explore_wasm_len;

// The weights a page may hold, the checkpoint's and its snapshots' together
// (base64 makes them a third larger): a browser reads the page into one
// string, and past a few hundred megabytes it gives up.
#define PAGE_MAX_WEIGHT_BYTES (256.0 * 1024 * 1024)

typedef struct {
    const char *ckpt, *out, *text, *text_file, *snapshots;
    int max_snapshots, force;
} ExploreOptions;

#define NUM_OPTIONS 7

static void option_table(ExploreOptions *o, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--ckpt", "FILE", OPT_STRING, &o->ckpt, "model checkpoint (.safetensors) from bin/train", 0,
         -1, 0},
        {"--out", "FILE", OPT_STRING, &o->out, "the page to write (one .html file)", 0, -1, 0},
        {"--text", "TEXT", OPT_STRING, &o->text,
         "the text the page opens with; unset: a line the model writes itself", 0, -1, 0},
        {"--text-file", "FILE", OPT_STRING, &o->text_file, "read that text from this file", 0, -1,
         0},
        {"--snapshots", "DIR", OPT_STRING, &o->snapshots,
         "training snapshots with weights (bin/train --heatmaps-every); unset: the checkpoint's "
         "folder's attn/, if it has any",
         0, -1, 0},
        {"--max-snapshots", "N", OPT_INT, &o->max_snapshots,
         "at most N snapshots, spread evenly from the first to the last (0: none)", 0, 1000, 0},
        {"--force", NULL, OPT_FLAG, &o->force, "replace --out if it is a file already", 0, -1, 0},
    };
    memcpy(t, table, sizeof table);
}

static const char USAGE[] =
    "usage: bin/explore --ckpt out/model.safetensors --out out/explore.html [options]\n\n"
    "Writes one HTML file that runs the model in the browser, offline: type any text\n"
    "and watch every head's attention, the loss and the next characters; switch heads\n"
    "off; follow one head's arithmetic; write with the model; replay your text through\n"
    "the training snapshots. docs/explore.md says what the page shows.";

static ExploreOptions default_options(void) {
    return (ExploreOptions){.ckpt = "out/model.safetensors", .out = "out/explore.html",
                            .max_snapshots = 8};
}

static ExploreOptions parse_options(int argc, char **argv) {
    ExploreOptions o = default_options(), defaults = default_options();
    Option table[NUM_OPTIONS], help_table[NUM_OPTIONS];
    option_table(&o, table);
    option_table(&defaults, help_table);
    options_parse_or_exit(table, help_table, NUM_OPTIONS, USAGE, NULL, 0, argc, argv);
    if (o.text && o.text_file) usage_error("give --text or --text-file, not both");
    return o;
}

// ---- the models the page holds

typedef struct {
    GPT model;
    long step;            // -1: the checkpoint itself
    HeadScores *scores;   // (L*NH) the weights' scores (copying, K-composition)
} PageModel;

static void weight_scores(PageModel *m) {
    int H = m->model.config.layers * m->model.config.heads;
    m->scores = xcalloc((size_t)H, sizeof(HeadScores));
    weight_head_scores(&m->model, NAN, m->scores, NULL);
}

// The weights of count models of num_params each fit in a page, or die
// saying how much they make.
static void check_page_size(size_t num_params, int count) {
    double bytes = (double)count * sizeof(float) * num_params;
    if (bytes > PAGE_MAX_WEIGHT_BYTES)
        die("%d model%s of %zu parameters make %.0f MB of weights; a page holds at most %.0f MB%s",
            count, count > 1 ? "s" : "", num_params, bytes / 1e6, PAGE_MAX_WEIGHT_BYTES / 1e6,
            count > 1 ? " (fewer --max-snapshots, or 0)" : "");
}

// The snapshots of dir (DIR/step_N/model.safetensors; the steps whose
// folder has none are left out), at most max spread evenly, after the
// checkpoint in models[0] (room for 1 + max). Returns the number of models.
static int load_snapshots(const char *dir, int given, int max, const Vocab *vocab,
                          PageModel *models) {
    char err[2048];
    long *steps = NULL;
    int count = 0;
    check_page_size(models[0].model.num_params, 1);
    if (max == 0 || !file_exists(dir)) {
        if (given && max > 0) die("--snapshots %s: no such folder", dir);
        return 1;
    }
    if (!snapshot_steps(dir, &steps, &count, err, sizeof err)) die("%s", err);
    long *with_weights = xcalloc((size_t)count + 1, sizeof(long));
    int usable = 0;
    for (int i = 0; i < count; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/step_%ld/model.safetensors", dir, steps[i]);
        if (file_exists(path)) with_weights[usable++] = steps[i];
    }
    free(steps);
    if (given && usable == 0)
        die("--snapshots %s: no snapshot with weights (step_N/model.safetensors; bin/train "
            "--heatmaps-every writes them)", dir);
    int *chosen = xcalloc((size_t)usable + 1, sizeof(int));
    int n = spread_evenly(usable, max, chosen);
    check_page_size(models[0].model.num_params, 1 + n);
    for (int i = 0; i < n; i++) {
        PageModel *m = &models[1 + i];
        char path[4400];
        snprintf(path, sizeof path, "%s/step_%ld/model.safetensors", dir, with_weights[chosen[i]]);
        Vocab snapshot_vocab;
        if (!gpt_load(path, &m->model, &snapshot_vocab, err, sizeof err)) die("%s", err);
        if (!gpt_config_equal(&m->model.config, &models[0].model.config) ||
            !vocab_equal(&snapshot_vocab, vocab))
            die("%s: another model's snapshot (its shape or vocabulary differs from the "
                "checkpoint's)", path);
        vocab_free(&snapshot_vocab);
        m->step = with_weights[chosen[i]];
        weight_scores(m);
    }
    free(chosen);
    free(with_weights);
    return 1 + n;
}

// ---- writing the page

static void json_number(FILE *out, double v) {
    if (isnan(v) || isinf(v)) fputs("null", out);
    else fprintf(out, "%.9g", v);
}

static void json_code_points(FILE *out, const uint32_t *chars, int n) {
    fputc('[', out);
    for (int i = 0; i < n; i++) fprintf(out, "%s%u", i ? "," : "", chars[i]);
    fputc(']', out);
}

// The model's description for the page: its shape and block (the names
// and the page_new numbers), the vocabulary, the opening text, the models
// (the checkpoint and each snapshot) with their weights' scores, and the
// scores' names.
static void write_data(FILE *out, const char *ckpt, const Vocab *vocab, const uint32_t *text,
                       int text_len, const PageModel *models, int count) {
    const GPTConfig *c = &models[0].model.config;
    int H = c->layers * c->heads;
    fprintf(out,
            "{\"checkpoint\":\"%s\",\"config\":{\"vocab_size\":%d,\"context\":%d,\"layers\":%d,"
            "\"heads\":%d,\"dim\":%d,\"choices\":[",
            strrchr(ckpt, '/') ? strrchr(ckpt, '/') + 1 : ckpt, c->vocab_size, c->context,
            c->layers, c->heads, c->dim);
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) {
        if (i) fputc(',', out);
        json_number(out, gpt_choice_get(c, i));
    }
    char block[512]; // flags: letters, digits, '-', '.' and spaces, nothing JSON escapes
    gpt_block_describe(c, 1, block, sizeof block);
    fprintf(out, "],\"params\":%zu},\"block\":\"%s\"", models[0].model.num_params, block);
    fputs(",\"vocab\":", out);
    json_code_points(out, vocab->code_points, vocab->size);
    fputs(",\"text\":", out);
    json_code_points(out, text, text_len);
    uint8_t table[HEATMAP_COLORS][3]; // the heatmaps' colours, viridis (viz/heatmap.h)
    colormap_table(COLORMAP_VIRIDIS, table);
    fputs(",\"colormap\":\"", out);
    for (int k = 0; k < HEATMAP_COLORS; k++)
        fprintf(out, "%02x%02x%02x", table[k][0], table[k][1], table[k][2]);
    fputs("\",\"scoreNames\":[", out);
    for (int k = 0; k < NUM_SCORES; k++) fprintf(out, "%s\"%s\"", k ? "," : "", score_name(k));
    fputs("],\"scoreTags\":[", out);
    for (int k = 0; k < NUM_SCORES; k++) fprintf(out, "%s\"%s\"", k ? "," : "", score_tag(k));
    fprintf(out, "],\"headTypes\":%d,\"headTypeMinExcess\":%g,\"models\":[", NUM_HEAD_TYPES,
            HEAD_TYPE_MIN_EXCESS);
    for (int i = 0; i < count; i++) {
        fprintf(out, "%s{\"step\":%ld,\"weightScores\":[", i ? "," : "", models[i].step);
        for (int h = 0; h < H; h++) {
            const HeadScores *s = &models[i].scores[h];
            fputs(h ? ",[" : "[", out);
            json_number(out, s->value[SCORE_COPYING]);
            fputc(',', out);
            json_number(out, s->uniform[SCORE_COPYING]);
            fputc(',', out);
            json_number(out, s->value[SCORE_K_COMPOSITION]);
            fputc(',', out);
            json_number(out, s->uniform[SCORE_K_COMPOSITION]);
            fputc(']', out);
        }
        fputs("]}", out);
    }
    fputs("]}", out);
}

// What bin/explore puts in the page.
typedef struct {
    const char *ckpt;
    const Vocab *vocab;
    const uint32_t *text;
    int text_len;
    const PageModel *models;
    int count;
} PageData;

static void write_data_slot(FILE *out, const void *context) {
    const PageData *d = context;
    write_data(out, d->ckpt, d->vocab, d->text, d->text_len, d->models, d->count);
}

static void write_module(FILE *out, const void *context) {
    (void)context;
    base64_write(out, explore_wasm, explore_wasm_len);
}

// Each model's weights, little-endian floats as WebAssembly's memory holds
// them (x86, ARM): a script element a model.
static void write_weights(FILE *out, const void *context) {
    const PageData *d = context;
    for (int i = 0; i < d->count; i++) {
        fprintf(out, "<script class=\"weights\" type=\"text/plain\" data-model=\"%d\">", i);
        base64_write(out, d->models[i].model.params_memory,
                     sizeof(float) * d->models[i].model.num_params);
        fputs("</script>\n", out);
    }
}

static void write_page(FILE *out, const PageData *data) {
    TemplateSlot slots[] = {
        {"STYLE", (const char *)explore_css, NULL}, {"SCRIPT", (const char *)explore_js, NULL},
        {"DATA", NULL, write_data_slot},           {"MODULE", NULL, write_module},
        {"WEIGHTS", NULL, write_weights},
    };
    template_write(out, (const char *)explore_html, slots, sizeof slots / sizeof slots[0], data);
}

// --out must be a new file or, with --force, a regular file that is not the
// checkpoint itself.
static void check_out(const ExploreOptions *o) {
    struct stat out_st, ckpt_st;
    if (lstat(o->out, &out_st) != 0) {
        if (errno != ENOENT) die("--out %s: %s", o->out, strerror(errno));
        return;
    }
    if (!S_ISREG(out_st.st_mode))
        die("--out %s: not a regular file (a folder, a link, a device or a pipe); bin/explore "
            "writes only files of its own",
            o->out);
    if (stat(o->ckpt, &ckpt_st) == 0 && ckpt_st.st_dev == out_st.st_dev &&
        ckpt_st.st_ino == out_st.st_ino)
        die("--out %s is the checkpoint itself", o->out);
    if (!o->force) die("--out %s exists; --force replaces it", o->out);
}

// The opening text as code points (invalid UTF-8 is an error).
static uint32_t *read_text(const ExploreOptions *o, int *n) {
    size_t len = 0;
    char *file_text = NULL;
    const char *text = o->text ? o->text : "";
    if (o->text_file) text = file_text = read_whole_file(o->text_file, &len);
    else len = strlen(text);
    uint32_t *chars = xcalloc(len + 1, sizeof(uint32_t));
    size_t pos = 0;
    *n = 0;
    while (pos < len) {
        if (!utf8_decode((const unsigned char *)text, len, &pos, &chars[*n]))
            die("%s: invalid UTF-8 at byte offset %zu", o->text_file ? o->text_file : "--text",
                pos);
        (*n)++;
    }
    free(file_text);
    return chars;
}

int main(int argc, char **argv) {
    ExploreOptions o = parse_options(argc, argv);
    check_out(&o);
    int text_len;
    uint32_t *text = read_text(&o, &text_len);
    if (!file_exists(o.ckpt))
        die("%s: no such file: train a model first (./bin/train saves out/model.safetensors), or "
            "give --ckpt FILE", o.ckpt);
    char err[2048];
    PageModel *models = xcalloc(1 + (size_t)o.max_snapshots, sizeof(PageModel));
    Vocab vocab;
    if (!gpt_load(o.ckpt, &models[0].model, &vocab, err, sizeof err)) die("%s", err);
    models[0].step = -1;
    char default_dir[4200];
    const char *dir = o.snapshots;
    if (!dir) {
        const char *slash = strrchr(o.ckpt, '/');
        int folder = slash ? (int)(slash - o.ckpt) : 1;
        snprintf(default_dir, sizeof default_dir, "%.*s/attn", folder, slash ? o.ckpt : ".");
        dir = default_dir;
    }
    int count = load_snapshots(dir, o.snapshots != NULL, o.max_snapshots, &vocab, models);
    weight_scores(&models[0]);
    AtomicFile af;
    if (!atomic_file_open(&af, o.out, err, sizeof err)) die("%s", err);
    PageData data = {o.ckpt, &vocab, text, text_len, models, count};
    write_page(af.file, &data);
    if (ferror(af.file)) atomic_file_write_failed(&af);
    if (!atomic_file_commit(&af, err, sizeof err)) die("%s", err);
    struct stat st;
    stat(o.out, &st);
    printf("%s: %.1f MB, the checkpoint%s", o.out, st.st_size / 1e6, count > 1 ? " and " : "");
    if (count > 1) {
        printf("%d snapshot%s (steps", count - 1, count > 2 ? "s" : "");
        for (int i = 1; i < count; i++) printf(" %ld", models[i].step);
        printf(")");
    }
    printf("; open it in a browser\n");
    for (int i = 0; i < count; i++) {
        gpt_free(&models[i].model);
        free(models[i].scores);
    }
    free(models);
    vocab_free(&vocab);
    free(text);
    return 0;
}
