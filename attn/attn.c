// attn.c: bin/attn, what every attention head attends to. Runs a checkpoint
// over a text and writes one heatmap per head (rows = query positions,
// columns = key positions), an overview of all heads, and optionally the raw
// probabilities. The pictures' layout is described in heatmap.h. Then the
// atlas: head scores (scores.h) as a table, OUT/scores.csv and one picture
// per score; the QK and OV circuits of every head in OUT/circuits/
// (circuits.h); and with --html the explorer page OUT/index.html
// (explorer.h), with the training snapshots when there are any (atlas.h).
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"
#include "../base/files.h"
#include "../base/util.h"
#include "../base/options.h"
#include "../viz/atlas.h"
#include "../viz/circuits.h"
#include "../viz/explorer.h"
#include "../viz/heatmap.h"
#include "../viz/score_grid.h"
#include "../viz/scores.h"
#include "../viz/unifont.h"

typedef struct {
    const char *ckpt, *text, *text_file, *out, *colormap, *font, *snapshots;
    int layer, head, cell, raw, html;
    const char *precision;
    Precision products; // --precision, checked
    Bf16Kernel bf16;    // what bf16 products run on (GPT_BF16_KERNEL may limit it)
} AttnOptions;

#define NUM_OPTIONS 13

static void option_table(AttnOptions *o, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--ckpt", "FILE", OPT_STRING, &o->ckpt, "model checkpoint (.safetensors) from bin/train", 0, -1, 0},
        {"--text", "TEXT", OPT_STRING, &o->text, "the text to look at", 0, -1, 0},
        {"--text-file", "FILE", OPT_STRING, &o->text_file, "read the text from this file", 0, -1, 0},
        {"--out", "OUT", OPT_STRING, &o->out, "output folder (created with its parents)", 0, -1, 0},
        {"--layer", "L", OPT_INT, &o->layer, "draw only this layer (-1: all)", -1, 100000, 0},
        {"--head", "H", OPT_INT, &o->head, "draw only this head (-1: all)", -1, 100000, 0},
        {"--cell", "PIXELS", OPT_INT, &o->cell, "pixels per cell (every character is labelled from 9 px with Unifont, from 10 with "
         "the built-in font; below, only some)",
         1, HEATMAP_MAX_CELL, 0},
        {"--colormap", "NAME", OPT_STRING, &o->colormap, "viridis, magma or gray", 0, -1, 0},
        {"--raw", NULL, OPT_FLAG, &o->raw,
         "also write OUT/attention.safetensors: F32 attn [layers, heads, T, T], the text in its "
         "metadata", 0, -1, 0},
        {"--font", "FILE|builtin", OPT_STRING, &o->font,
         "label font: a GNU Unifont .hex file, or builtin; unset: $GPT_UNIFONT or else "
         UNIFONT_DEFAULT_PATH " if present, else builtin (with a note)", 0, -1, 0},
        {"--html", NULL, OPT_FLAG, &o->html,
         "also write OUT/index.html, the self-contained explorer (no network access)", 0, -1, 0},
        {"--snapshots", "DIR", OPT_STRING, &o->snapshots,
         "training snapshots for the explorer's slider; unset: the checkpoint's folder/attn "
         "when it exists", 0, -1, 0},
        {"--precision", "fp32|bf16", OPT_STRING, &o->precision, PRECISION_HELP, 0, -1, 0},
    };
    memcpy(t, table, sizeof table);
}

static AttnOptions default_options(void) {
    return (AttnOptions){.ckpt = "out/model.safetensors", .out = "attn_out",
                         .colormap = "viridis", .layer = -1, .head = -1,
                         .cell = HEATMAP_DEFAULT_CELL,
                         .precision = "fp32"};
}

// The text's code points, every one in the vocabulary (else a one-line
// error naming the first unknown character, its position and the count).
static uint32_t *decode_text(const char *source, const char *text, size_t len, const Vocab *vocab,
                             int *num_chars) {
    EncodedText encoded;
    char err[1024];
    if (!vocab_encode_text(vocab, source, text, len, &encoded, err, sizeof err)) die("%s", err);
    if (encoded.unknown) {
        vocab_unknown_message(&encoded, source, err, sizeof err);
        die("%s", err);
    }
    if (encoded.num_ids == 0) die("%s: the text is empty", source);
    free(encoded.ids);
    *num_chars = encoded.num_ids;
    return encoded.chars;
}

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
    printf("wrote %s/scores.csv, %s/score_*.png and %s/circuits/ (%d of %d characters)\n", o->out,
           o->out, o->out, n, vocab->size);
    free(ids);
    free(shown);
}

// The training snapshots the explorer's slider shows: up to
// EXPLORER_MAX_SNAPSHOTS of them, read whole.
#define EXPLORER_MAX_SNAPSHOTS 24
typedef struct {
    Snapshot *snaps;
    int count;
} ExplorerSnapshots;

// Read before anything is written, so that a bad --snapshots leaves the
// output folder as it was. Those of the default folder (the checkpoint's
// folder/attn) that this model cannot read (another run's) are left out
// with a note; with --snapshots every problem is an error.
static ExplorerSnapshots read_explorer_snapshots(const AttnOptions *o, const GPT *model) {
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
    free(dir);
    free(steps);
    return shown;
}

static void free_explorer_snapshots(ExplorerSnapshots *shown) {
    for (int v = 0; v < shown->count; v++) snapshot_free(&shown->snaps[v]);
    free(shown->snaps);
    memset(shown, 0, sizeof *shown);
}

// The explorer: view 0 is this text (the model holds its attention), then
// the training snapshots.
static void write_explorer(const AttnOptions *o, const GPT *model, const uint32_t *window, int T,
                           const HeadScores *scores, const ExplorerSnapshots *shown) {
    int L = model->config.layers, NH = model->config.heads;
    char err[2048], path[4200];
    ExplorerView *views = xcalloc((size_t)shown->count + 1, sizeof *views);
    char (*labels)[48] = xcalloc((size_t)shown->count + 1, sizeof *labels);
    size_t per_head = (size_t)T * T;
    float *attn = xmalloc(sizeof(float) * L * NH * per_head);
    for (int h = 0; h < L * NH; h++)
        memcpy(attn + h * per_head, gpt_attention_probs(model, h / NH, h % NH, 0), per_head * sizeof(float));
    views[0] = (ExplorerView){"your text", -1, NAN, T, window, attn, scores};
    for (int v = 0; v < shown->count; v++) {
        const Snapshot *s = &shown->snaps[v];
        snprintf(labels[v + 1], sizeof labels[v + 1], "step %ld", s->step);
        views[v + 1] = (ExplorerView){labels[v + 1], s->step, s->loss, s->T, s->chars, s->attn, s->scores};
    }
    snprintf(path, sizeof path, "%s/index.html", o->out);
    if (!explorer_write(path, L, NH, views, shown->count + 1, err, sizeof err)) die("%s", err);
    printf("wrote %s (%d training snapshot%s)\n", path, shown->count, shown->count == 1 ? "" : "s");
    free(attn);
    free(labels);
    free(views);
}

// The flags, parsed and checked (--help prints the usage and exits 0);
// --precision takes effect here.
static AttnOptions parse_options(int argc, char **argv) {
    AttnOptions o = default_options();
    Option table[NUM_OPTIONS];
    option_table(&o, table);
    char err[2048];
    int parsed = options_parse(table, NUM_OPTIONS, argc, argv, err, sizeof err);
    if (parsed == OPTIONS_HELP) {
        AttnOptions defaults = default_options();
        Option help_table[NUM_OPTIONS];
        option_table(&defaults, help_table);
        options_usage(stdout,
                      "usage: bin/attn --ckpt out/model.safetensors (--text TEXT | --text-file FILE) [options]\n\n"
                      "Runs the model over the text and writes, for every attention head,\n"
                      "OUT/layer{l}_head{h}.png: row i = query position, column j = key position,\n"
                      "colour = attention weight on a fixed 0..1 scale, the masked future hatched;\n"
                      "and OUT/overview.png with every head, each tile tagged with its head's type\n"
                      "when one stands clearly above uniform attention. Then the atlas: head scores\n"
                      "(previous-token, current-token, first-position, duplicate-token, induction on a\n"
                      "built-in probe, entropy, distance; each beside its value for uniform attention)\n"
                      "printed, in OUT/scores.csv and as OUT/score_<name>.png; the QK and OV circuits\n"
                      "of each head in characters, OUT/circuits/layer{l}_head{h}.png, with the singular\n"
                      "values of W_O.W_V in OUT/circuits/singular_values.csv; with --html the explorer\n"
                      "OUT/index.html. A text longer than the model's context is cut to its last\n"
                      "context characters.",
                      help_table, NUM_OPTIONS);
        exit(0);
    }
    if (!parsed) usage_error("%s", err);
    o.products = option_choice("--precision", o.precision, precision_names, 2);
    o.bf16 = bf16_best_kernel(env_choice("GPT_BF16_KERNEL", bf16_limit_names, 3, BF16_AMX));
    const char *note = precision_note(o.products, o.bf16);
    if (note) fprintf(stderr, "note: %s\n", note);
    if (o.text && o.text_file) usage_error("give --text or --text-file, not both");
    if (!o.text && !o.text_file) usage_error("give the text to look at: --text TEXT or --text-file FILE");
    return o;
}

// The pictures' settings from the flags (each head's tag comes with the scores).
static HeatmapOptions heatmap_options(const AttnOptions *o) {
    HeatmapOptions heatmap = heatmap_default_options();
    heatmap.cell = o->cell;
    heatmap.raw = o->raw;
    heatmap.colormap = colormap_from_name(o->colormap);
    if (heatmap.colormap < 0)
        usage_error("--colormap: unknown colour map '%s' (viridis, magma or gray)", o->colormap);
    heatmap.layer = o->layer;
    heatmap.head = o->head;
    return heatmap;
}

// The label font, then the checkpoint's model and vocabulary; --layer and
// --head must name one of its layers and heads.
static void load_model(const AttnOptions *o, GPT *model, Vocab *vocab) {
    char err[2048];
    if (!label_font_select(o->font, err, sizeof err)) die("--font: %s", err);
    if (!gpt_load(o->ckpt, model, vocab, err, sizeof err)) die("%s", err);
    int L = model->config.layers, NH = model->config.heads;
    if (o->layer >= L)
        usage_error("--layer %d is out of range: the model has %d layer%s (0..%d, or -1 for all)",
                    o->layer, L, L == 1 ? "" : "s", L - 1);
    if (o->head >= NH)
        usage_error("--head %d is out of range: the model has %d head%s (0..%d, or -1 for all)",
                    o->head, NH, NH == 1 ? "" : "s", NH - 1);
}

// The text to look at, and the window of it the model sees.
typedef struct {
    uint32_t *chars;  // (num_chars) the whole text's code points
    int num_chars;
    uint32_t *window; // (T) its last T <= context characters
    int T;
} AttnText;

// --text or --text-file as code points, cut to the model's context (which
// print_notes says); its pictures at --cell must fit.
static AttnText read_text(const AttnOptions *o, const GPT *model, const Vocab *vocab) {
    char err[2048];
    int L = model->config.layers, NH = model->config.heads, context = model->config.context;
    size_t len;
    char *file_text = NULL;
    const char *text = o->text, *source = "--text";
    if (o->text_file) {
        file_text = read_whole_file(o->text_file, &len);
        text = file_text;
        source = o->text_file;
    } else {
        len = strlen(o->text);
    }
    AttnText t;
    t.chars = decode_text(source, text, len, vocab, &t.T);
    free(file_text);
    t.num_chars = t.T;
    t.window = t.chars;
    if (t.T > context) {
        t.window = t.chars + (t.T - context);
        t.T = context;
    }
    if (!heatmaps_check_size(L, NH, t.T, o->cell, err, sizeof err)) usage_error("--cell: %s", err);
    return t;
}

// What the user should know once every input has passed (an error is the
// only line a bad input prints): the text was cut to the context, the
// labels use the built-in font.
static void print_notes(const AttnText *text) {
    if (text->T < text->num_chars)
        fprintf(stderr, "note: the text has %d characters, more than the model's context of %d: "
                "using the last %d\n", text->num_chars, text->T, text->T);
    const char *fallback = label_font_fallback();
    if (fallback)
        fprintf(stderr, "note: %s: labels use the built-in ASCII font, other characters show as "
                "boxes\n", fallback);
}

// Every head's scores (L*NH of them, the caller frees them); leaves the
// text's attention in the model.
static HeadScores *score_heads(GPT *model, const Vocab *vocab, const AttnText *text) {
    int L = model->config.layers, NH = model->config.heads, context = model->config.context;
    int T = text->T;
    int *tokens = xmalloc((size_t)T * sizeof(int));
    for (int i = 0; i < T; i++) tokens[i] = vocab_id(vocab, text->window[i]);
    // room for the induction probe too (scores.h)
    gpt_alloc_inference(model, 1, T > context ? T : context);
    HeadScores *scores = xmalloc(sizeof(HeadScores) * L * NH);
    model_head_scores(model, tokens, T, scores);
    free(tokens);
    return scores;
}

// The pictures: a heatmap per head and the overview, each head tagged with
// its type, then the scores and the circuits.
static void write_pictures(const AttnOptions *o, const GPT *model, const Vocab *vocab,
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

int main(int argc, char **argv) {
    // Every input is checked before anything is written: the flags, the
    // font, the checkpoint, the text (in the vocabulary, its pictures not
    // too large), that --out can be a folder, and the snapshots (last: the
    // default folder's unreadable ones are left out with a note, not an
    // error); then the notes.
    AttnOptions o = parse_options(argc, argv);
    HeatmapOptions heatmap = heatmap_options(&o);
    GPT model;
    Vocab vocab;
    load_model(&o, &model, &vocab);
    gpt_set_precision(&model, o.products, o.bf16);
    AttnText text = read_text(&o, &model, &vocab);
    struct stat out_stat;
    if (stat(o.out, &out_stat) == 0 && !S_ISDIR(out_stat.st_mode))
        die("--out %s: not a folder", o.out);
    ExplorerSnapshots snapshots = {0};
    if (o.html) snapshots = read_explorer_snapshots(&o, &model);
    print_notes(&text);

    HeadScores *scores = score_heads(&model, &vocab, &text);
    write_pictures(&o, &model, &vocab, &text, &heatmap, scores);
    if (o.html) write_explorer(&o, &model, text.window, text.T, scores, &snapshots);

    free_explorer_snapshots(&snapshots);
    free(scores);
    free(text.chars);
    gpt_free(&model);
    vocab_free(&vocab);
    return 0;
}
