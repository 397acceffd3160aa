// attn.c: bin/attn, what every attention head attends to. Runs a checkpoint
// over a text and writes one heatmap per head (rows = query positions,
// columns = key positions), an overview of all heads, and optionally the raw
// probabilities. The pictures' layout is described in heatmap.h. Then the
// atlas: head scores (scores.h) as a table, OUT/scores.csv and one picture
// per score; the QK and OV circuits of every head in OUT/circuits/
// (circuits.h) and their positions' path (position_circuit.h: learned
// positions' table, or RoPE's scores by distance, as the model's config
// says); and with --html the explorer page OUT/index.html
// (explorer.h), with the training snapshots when there are any (atlas.h).
// The analyses, each asked for by its flag: ablation (with the later
// patterns frozen too), the logit lens, attribution (interpret.h) and
// activation patching (patching.h).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../infer/threads.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"
#include "../base/files.h"
#include "../base/util.h"
#include "../base/options.h"
#include "../interpret/interpret.h"
#include "../interpret/patching.h"
#include "../viz/ablation_grid.h"
#include "../viz/atlas.h"
#include "../viz/attribution_chart.h"
#include "../viz/circuits.h"
#include "../viz/explorer.h"
#include "../viz/heatmap.h"
#include "../viz/logit_lens.h"
#include "../viz/patching_chart.h"
#include "../viz/position_circuit.h"
#include "../viz/score_grid.h"
#include "../viz/scores.h"
#include "../viz/unifont.h"

typedef struct {
    const char *ckpt, *text, *text_file, *out, *colormap, *font, *snapshots;
    int layer, head, cell, raw, html;
    const char *precision;
    Precision products; // --precision, checked
    Bf16Kernel bf16;    // what bf16 products run on (GPT_BF16_KERNEL may limit it)
    int ablate, ablate_windows, lens, attribute_position, force, skip_unknown;
    const char *ablate_text_file;
    int freeze_patterns, patch;
    const char *clean, *corrupt;
    int threads;
} AttnOptions;

#define NUM_OPTIONS 25

static void option_table(AttnOptions *o, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--ckpt", "FILE", OPT_STRING, &o->ckpt, "model checkpoint (.safetensors) from bin/train", 0, -1, 0},
        {"--text", "TEXT", OPT_STRING, &o->text, "the text to look at", 0, -1, 0},
        {"--text-file", "FILE", OPT_STRING, &o->text_file, "read the text from this file", 0, -1, 0},
        {"--out", "OUT", OPT_STRING, &o->out,
         "output folder (created with its parents): new, empty or one bin/attn wrote, unless "
         "--force", 0, -1, 0},
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
        {"--ablate", NULL, OPT_FLAG, &o->ablate,
         "also write OUT/ablation.csv and OUT/ablation.png: the loss over the text's first "
         "context+1 characters with each head, and each layer's attention and MLP, zeroed or "
         "replaced by its mean", 0, -1, 0},
        {"--ablate-text-file", "FILE", OPT_STRING, &o->ablate_text_file,
         "--ablate with the losses averaged over windows of this text instead (the validation "
         "split, say)", 0, -1, 0},
        {"--ablate-windows", "N", OPT_INT, &o->ablate_windows,
         "at most N windows of --ablate-text-file, spread evenly over it", 1, 1000000, 0},
        {"--freeze-patterns", NULL, OPT_FLAG, &o->freeze_patterns,
         "with --ablate: each ablation again with every head above it attending as in the "
         "unchanged run (its attention pattern frozen), in two more columns of OUT/ablation.csv: "
         "the effect without moving where later heads look, beside the total", 0, -1, 0},
        {"--patch", NULL, OPT_FLAG, &o->patch,
         "also write OUT/patching.csv and OUT/patching.png: activation patching of the --clean "
         "text into the --corrupt one (default: a random string repeated, the first copy's "
         "last character changed in the corrupted text), each head and the stream into each "
         "block at each position; the recovery of LD = logit(clean answer) - logit(corrupted "
         "answer) at the last position, (LD patched - LD corrupted) / (LD clean - LD "
         "corrupted), 0 corrupted .. 1 clean; the answers: the character each text makes the "
         "model predict next (the default pair: the one its repetition predicts)", 0, -1, 0},
        {"--clean", "TEXT", OPT_STRING, &o->clean,
         "--patch's clean text: as many characters as --corrupt, at most the context, all in "
         "the vocabulary (--skip-unknown does not apply); also the text looked at when "
         "neither --text nor --text-file is given", 0, -1, 0},
        {"--corrupt", "TEXT", OPT_STRING, &o->corrupt,
         "--patch's corrupted text: --clean with a few characters changed", 0, -1, 0},
        {"--lens", NULL, OPT_FLAG, &o->lens,
         "also write OUT/logit_lens.csv and OUT/logit_lens.png: the prediction after the "
         "embeddings and after every block, at each of the text's first context positions", 0,
         -1, 0},
        {"--attribute-position", "P", OPT_INT, &o->attribute_position,
         "also write OUT/attribution.csv and OUT/attribution.png: what each head, MLP and "
         "embedding adds to logit(next) - logit(most likely other) at position P (0 is the "
         "text's first character; -1: none)", -1, 100000000, 0},
        {"--force", NULL, OPT_FLAG, &o->force,
         "write into OUT even when it holds files bin/attn did not write", 0, -1, 0},
        {"--skip-unknown", NULL, OPT_FLAG, &o->skip_unknown,
         "drop the characters of the texts that are not in the model's vocabulary (each named "
         "in a warning) instead of failing", 0, -1, 0},
        {"--threads", "N", OPT_INT, &o->threads,
         "OpenMP threads; unset: OMP_NUM_THREADS when set, else up to every core, the count "
         "whose forwards were fastest at start (timed as bin/train times its steps: fastest on "
         "a busy machine)", 1, 1024, 0},
    };
    memcpy(t, table, sizeof table);
}

static AttnOptions default_options(void) {
    return (AttnOptions){.ckpt = "out/model.safetensors", .out = "attn_out",
                         .colormap = "viridis", .layer = -1, .head = -1,
                         .cell = HEATMAP_DEFAULT_CELL,
                         .precision = "fp32", .ablate_windows = 600,
                         .attribute_position = -1};
}

// Every distinct character of text[0..len) (valid UTF-8) that the
// vocabulary lacks, in order of first appearance, into msg: "'€' (U+20AC)
// at position 1, 2 times; '™' (U+2122) at position 4" (the first 12, then
// how many more).
#define UNKNOWN_LISTED 12
static void list_unknown(const Vocab *vocab, const char *text, size_t len, char *msg,
                         size_t msg_len) {
    uint32_t seen[UNKNOWN_LISTED];
    int first_at[UNKNOWN_LISTED], times[UNKNOWN_LISTED], distinct = 0, more = 0;
    size_t pos = 0, used = 0;
    uint32_t cp;
    for (int position = 0; utf8_decode((const unsigned char *)text, len, &pos, &cp); position++) {
        if (vocab_id(vocab, cp) >= 0) continue;
        int k = 0;
        while (k < distinct && seen[k] != cp) k++;
        if (k < distinct) times[k]++;
        else if (distinct < UNKNOWN_LISTED)
            seen[distinct] = cp, first_at[distinct] = position, times[distinct++] = 1;
        else more++; // counts occurrences past the listed ones' characters
    }
    msg[0] = 0;
    for (int k = 0; k < distinct && used < msg_len; k++) {
        char shown[5] = {0};
        utf8_encode(seen[k], shown);
        // a control character would break the one-line message
        if (seen[k] < 0x20 || seen[k] == 0x7f) snprintf(shown, sizeof shown, "?");
        char count[32] = "";
        if (times[k] > 1) snprintf(count, sizeof count, ", %d times", times[k]);
        used += snprintf(msg + used, msg_len - used, "%s'%s' (U+%04X) at position %d%s",
                         k ? "; " : "", shown, seen[k], first_at[k], count);
    }
    if (more && used < msg_len)
        snprintf(msg + used, msg_len - used, "; and %d more occurrence%s of other characters", more,
                 more == 1 ? "" : "s");
}

// What decode_text does with a character the vocabulary lacks.
typedef enum {
    UNKNOWN_REFUSED,   // an error that names --skip-unknown
    UNKNOWN_SKIPPED,   // dropped, with a warning (--skip-unknown)
    UNKNOWN_NEVER_OK,  // an error: --patch's texts, whose positions must stay
} UnknownChars;

// The text's code points: every one in the vocabulary, or when skipped
// those that are (the others named in a warning); else a one-line error
// naming every unknown character. A NUL byte is refused as bin/train
// refuses it.
static uint32_t *decode_text(const char *source, const char *text, size_t len,
                             const Vocab *vocab, UnknownChars unknown, int *num_chars) {
    EncodedText encoded;
    char err[4096];
    const char *nul = memchr(text, 0, len);
    if (nul)
        die("%s: NUL byte at offset %zu (a binary file, not text?)", source, (size_t)(nul - text));
    if (!vocab_encode_text(vocab, source, text, len, &encoded, err, sizeof err)) die("%s", err);
    if (encoded.unknown) {
        char listed[3072];
        list_unknown(vocab, text, len, listed, sizeof listed);
        if (unknown == UNKNOWN_NEVER_OK)
            usage_error("%s: %d character%s not in the model's vocabulary: %s", source,
                        encoded.unknown, encoded.unknown == 1 ? " is" : "s are", listed);
        if (unknown == UNKNOWN_REFUSED)
            die("%s: %d character%s not in the model's vocabulary: %s; --skip-unknown drops them",
                source, encoded.unknown, encoded.unknown == 1 ? " is" : "s are", listed);
        fprintf(stderr, "warning: %s: %d character%s not in the model's vocabulary, dropped: %s\n",
                source, encoded.unknown, encoded.unknown == 1 ? "" : "s", listed);
    }
    if (encoded.num_ids == 0)
        die("%s: the text is empty%s", source, encoded.unknown ? " once its unknown characters are dropped" : "");
    free(encoded.ids);
    *num_chars = encoded.num_ids;
    return encoded.chars;
}

static UnknownChars unknown_chars(const AttnOptions *o) {
    return o->skip_unknown ? UNKNOWN_SKIPPED : UNKNOWN_REFUSED;
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
    snapshots_read_measures(dir, shown.snaps, shown.count);
    free(dir);
    free(steps);
    return shown;
}

static void free_explorer_snapshots(ExplorerSnapshots *shown) {
    for (int v = 0; v < shown->count; v++) snapshot_free(&shown->snaps[v]);
    free(shown->snaps);
    memset(shown, 0, sizeof *shown);
}

// The attention of the model's last forward (batch row 0, T positions),
// (L, NH, T, T): the text's, for the explorer, kept before the analyses
// run other forwards.
static float *text_attention(const GPT *model, int T) {
    int L = model->config.layers, NH = model->config.heads;
    size_t per_head = (size_t)T * T;
    float *attn = xmalloc(sizeof(float) * L * NH * per_head);
    for (int h = 0; h < L * NH; h++)
        memcpy(attn + h * per_head, gpt_attention_probs(model, h / NH, h % NH, 0), per_head * sizeof(float));
    return attn;
}

// The explorer: view 0 is this text (attn, its attention), then the
// training snapshots; the analyses' views when there are any.
static void write_explorer(const AttnOptions *o, const GPT *model, const uint32_t *window, int T,
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

// --help: the usage line and what bin/attn writes, above the options.
static const char USAGE[] =
    "usage: bin/attn --ckpt out/model.safetensors (--text TEXT | --text-file FILE | --patch) [options]\n\n"
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
    "context characters. Why a head matters, on the text's first context+1\n"
    "characters: --ablate (OUT/ablation.csv, .png), --lens (OUT/logit_lens.csv,\n"
    ".png), --attribute-position P (OUT/attribution.csv, .png), also in the\n"
    "explorer; and each head's QK circuit of the positions,\n"
    "OUT/circuits/positions_layer{l}_head{h}.png, or for a RoPE model its scores\n"
    "by distance, OUT/circuits/distance_layer{l}_head{h}.png and\n"
    "OUT/circuits/distance.csv (docs/atlas.md). Where a prediction comes from:\n"
    "--patch runs a clean and a corrupted text of equal length (--clean,\n"
    "--corrupt; default: a random string of the vocabulary repeated, the corrupted\n"
    "one's first copy ending in another character), then puts each head's output\n"
    "and the stream into each block at each position of the clean run into the\n"
    "corrupted one, and writes how much of logit(clean answer) - logit(corrupted\n"
    "answer) at the last position comes back, 0 .. 1 (OUT/patching.csv, .png, also\n"
    "in the explorer); with neither --text nor --text-file the clean text is the\n"
    "one looked at. OUT must be new, empty or written by bin/attn (its\n"
    "OUT/.written-by-bin-attn), or --force.";

// The flags, parsed and checked (--help prints the usage and exits 0);
// --precision takes effect here.
static AttnOptions parse_options(int argc, char **argv) {
    AttnOptions o = default_options(), defaults = default_options();
    Option table[NUM_OPTIONS], help_table[NUM_OPTIONS];
    option_table(&o, table);
    option_table(&defaults, help_table);
    options_parse_or_exit(table, help_table, NUM_OPTIONS, USAGE, NULL, 0, argc, argv);
    o.products = option_choice("--precision", o.precision, precision_names, 2);
    o.bf16 = bf16_best_kernel(env_choice("GPT_BF16_KERNEL", bf16_limit_names, BF16_LIMITS, BF16_AMX));
    const char *note = precision_note(o.products, o.bf16);
    if (note) fprintf(stderr, "note: %s\n", note);
    if (o.ablate_text_file) o.ablate = 1;
    if (option_given(table, NUM_OPTIONS, "--ablate-windows") && !o.ablate_text_file)
        usage_error("--ablate-windows: give it with --ablate-text-file (the windows are that "
                    "text's)");
    if (o.freeze_patterns && !o.ablate)
        usage_error("--freeze-patterns: give it with --ablate (it freezes the attention patterns "
                    "of the ablated runs)");
    if ((o.clean || o.corrupt) && !o.patch)
        usage_error("%s: give it with --patch (the texts are activation patching's)",
                    o.clean ? "--clean" : "--corrupt");
    if (!o.clean != !o.corrupt)
        usage_error("--patch: give both --clean and --corrupt, or neither for the built-in pair "
                    "(only %s given)", o.clean ? "--clean" : "--corrupt");
    if (o.text && o.text_file) usage_error("give --text or --text-file, not both");
    if (!o.text && !o.text_file && !o.patch)
        usage_error("give the text to look at: --text TEXT or --text-file FILE");
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
    if (!file_exists(o->ckpt))
        die("%s: no such file: train a model first (./bin/train saves out/model.safetensors), or "
            "give --ckpt FILE", o->ckpt);
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
    t.chars = decode_text(source, text, len, vocab, unknown_chars(o), &t.T);
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

// ---- what the analyses read: the prediction window and the ablation's windows

// The text's first min(n, context + 1) characters: position t (0..T-1)
// reads characters 0..t and predicts character t + 1. What --ablate (the
// one window), --lens and --attribute-position look at.
typedef struct {
    int *tokens, *targets;  // (T)
    const uint32_t *chars;  // (T + 1)
    int T;
} PredictionWindow;

// The windows --ablate averages over: tokens and targets (W,T).
typedef struct {
    int *tokens, *targets;
    int W, T;
} AblationWindows;

static int analyses_asked(const AttnOptions *o) {
    return o->ablate || o->lens || o->attribute_position >= 0;
}

// The flag that asked for a prediction window (for its errors).
static const char *analysis_flag(const AttnOptions *o) {
    return o->ablate ? "--ablate" : o->lens ? "--lens" : "--attribute-position";
}

// Checked: at least 2 characters, and --attribute-position inside the window.
static PredictionWindow prediction_window(const AttnOptions *o, const GPT *model,
                                          const Vocab *vocab, const AttnText *text) {
    PredictionWindow w = {0};
    if (!analyses_asked(o)) return w;
    if (text->num_chars < 2)
        die("%s: the text has 1 character, need at least 2 (each position predicts the next)",
            analysis_flag(o));
    w.T = text->num_chars - 1 < model->config.context ? text->num_chars - 1 : model->config.context;
    if (o->attribute_position >= w.T)
        die("--attribute-position %d is out of range: the text's first %d positions predict the "
            "character after them (0..%d)", o->attribute_position, w.T, w.T - 1);
    w.chars = text->chars;
    w.tokens = xmalloc(sizeof(int) * w.T);
    w.targets = xmalloc(sizeof(int) * w.T);
    for (int t = 0; t < w.T; t++) {
        w.tokens[t] = vocab_id(vocab, text->chars[t]);
        w.targets[t] = vocab_id(vocab, text->chars[t + 1]);
    }
    return w;
}

// --ablate-text-file's windows: W = min(--ablate-windows, (n-1)/T) windows
// of T + 1 characters (T = min(context, n - 1)), the first at the start,
// the last at the end, the others spread evenly between; without the flag,
// the prediction window alone.
static AblationWindows ablation_windows(const AttnOptions *o, const GPT *model,
                                        const Vocab *vocab, const PredictionWindow *window) {
    AblationWindows set = {0};
    if (!o->ablate) return set;
    if (!o->ablate_text_file) {
        set.W = 1;
        set.T = window->T;
        set.tokens = xmalloc(sizeof(int) * set.T);
        set.targets = xmalloc(sizeof(int) * set.T);
        memcpy(set.tokens, window->tokens, sizeof(int) * set.T);
        memcpy(set.targets, window->targets, sizeof(int) * set.T);
        return set;
    }
    size_t len;
    char *file_text = read_whole_file(o->ablate_text_file, &len);
    int n;
    uint32_t *chars = decode_text(o->ablate_text_file, file_text, len, vocab, unknown_chars(o), &n);
    free(file_text);
    if (n < 2)
        die("--ablate-text-file %s: 1 character, need at least 2 (each position predicts the next)",
            o->ablate_text_file);
    set.T = n - 1 < model->config.context ? n - 1 : model->config.context;
    int most = (n - 1) / set.T;
    set.W = o->ablate_windows < most ? o->ablate_windows : most;
    set.tokens = xmalloc(sizeof(int) * set.W * set.T);
    set.targets = xmalloc(sizeof(int) * set.W * set.T);
    for (int w = 0; w < set.W; w++) {
        long start = set.W > 1 ? (long)w * (n - 1 - set.T) / (set.W - 1) : 0;
        for (int t = 0; t < set.T; t++) {
            set.tokens[(long)w * set.T + t] = vocab_id(vocab, chars[start + t]);
            set.targets[(long)w * set.T + t] = vocab_id(vocab, chars[start + t + 1]);
        }
    }
    free(chars);
    return set;
}

// ---- activation patching's two texts

// The default pair (patching.h: patching_default_pair): a string of at most
// PATCH_DEFAULT_REPEAT distinct characters repeated, drawn from the
// vocabulary's visible characters by a fixed seed, so that the same model
// always gets the same pair.
#define PATCH_DEFAULT_REPEAT 10
#define PATCH_DEFAULT_SEED 41

// --patch's two texts, and what patching them found.
typedef struct {
    int T;
    int *clean, *corrupt;                  // (T) token ids
    uint32_t *clean_chars, *corrupt_chars; // (T)
    int clean_answer, corrupt_answer;      // token ids; -1 until run_patching finds each
                                           // text's prediction (--clean, --corrupt)
    char *clean_text;                      // UTF-8: looked at when no text is given
    Patching found;
} PatchPair;

// A character for a one-line message: itself, or U+XXXX for a control character.
static const char *char_shown(uint32_t cp, char shown[16]) {
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
        snprintf(shown, 16, "U+%04X", (unsigned)cp);
    } else {
        int n = utf8_encode(cp, shown);
        shown[n] = 0;
    }
    return shown;
}

static char *utf8_text(const uint32_t *chars, int n) {
    char *text = xmalloc((size_t)4 * n + 1), *at = text;
    for (int i = 0; i < n; i++) at += utf8_encode(chars[i], at);
    *at = 0;
    return text;
}

static PatchPair default_patch_pair(const GPT *model, const Vocab *vocab) {
    int V = vocab->size, count = 0, *candidates = xmalloc(sizeof(int) * V);
    for (int v = 0; v < V; v++) {
        uint32_t cp = vocab->code_points[v];
        if (cp > 0x20 && cp != 0x7f && !(cp >= 0x80 && cp <= 0xa0)) candidates[count++] = v;
    }
    int n = PATCH_DEFAULT_REPEAT, context = model->config.context;
    if (n > (context + 1) / 2) n = (context + 1) / 2;
    if (n > count - 1) n = count - 1;
    if (n < 2)
        usage_error("--patch: the built-in pair needs a context of at least 3 and 3 visible "
                    "characters in the vocabulary (this model: context %d, %d); give --clean and "
                    "--corrupt", context, count);
    PatchPair pair = {.T = 2 * n - 1};
    pair.clean = xmalloc(sizeof(int) * pair.T);
    pair.corrupt = xmalloc(sizeof(int) * pair.T);
    patching_default_pair(candidates, count, n, PATCH_DEFAULT_SEED, pair.clean, pair.corrupt,
                          &pair.clean_answer, &pair.corrupt_answer);
    free(candidates);
    pair.clean_chars = xmalloc(sizeof(uint32_t) * pair.T);
    pair.corrupt_chars = xmalloc(sizeof(uint32_t) * pair.T);
    for (int t = 0; t < pair.T; t++) {
        pair.clean_chars[t] = vocab->code_points[pair.clean[t]];
        pair.corrupt_chars[t] = vocab->code_points[pair.corrupt[t]];
    }
    return pair;
}

// --clean and --corrupt, checked: each in the vocabulary, of equal length,
// at most the context, not the same.
static PatchPair given_patch_pair(const AttnOptions *o, const GPT *model, const Vocab *vocab) {
    PatchPair pair = {.clean_answer = -1, .corrupt_answer = -1};
    int context = model->config.context, corrupt_T;
    pair.clean_chars = decode_text("--clean", o->clean, strlen(o->clean), vocab, UNKNOWN_NEVER_OK,
                                   &pair.T);
    pair.corrupt_chars = decode_text("--corrupt", o->corrupt, strlen(o->corrupt), vocab,
                                     UNKNOWN_NEVER_OK, &corrupt_T);
    if (corrupt_T != pair.T)
        usage_error("--patch: --clean has %d characters and --corrupt %d: the texts must be of "
                    "equal length, compared position by position", pair.T, corrupt_T);
    if (pair.T > context)
        usage_error("--patch: the texts have %d characters, more than the model's context of %d",
                    pair.T, context);
    int differ = 0;
    for (int t = 0; t < pair.T; t++) differ += pair.clean_chars[t] != pair.corrupt_chars[t];
    if (!differ)
        usage_error("--patch: --clean and --corrupt are the same text: nothing to recover");
    pair.clean = xmalloc(sizeof(int) * pair.T);
    pair.corrupt = xmalloc(sizeof(int) * pair.T);
    for (int t = 0; t < pair.T; t++) {
        pair.clean[t] = vocab_id(vocab, pair.clean_chars[t]);
        pair.corrupt[t] = vocab_id(vocab, pair.corrupt_chars[t]);
    }
    return pair;
}

// The pair --patch patches (all zero without --patch).
static PatchPair patch_pair(const AttnOptions *o, const GPT *model, const Vocab *vocab) {
    PatchPair pair = {0};
    if (!o->patch) return pair;
    pair = o->clean ? given_patch_pair(o, model, vocab) : default_patch_pair(model, vocab);
    pair.clean_text = utf8_text(pair.clean_chars, pair.T);
    return pair;
}

// Runs the patching, before anything is written: a pair that cannot be
// measured (both texts predicting the same character, or logit
// differences too close) is refused like a bad flag.
static void run_patching(GPT *model, const Vocab *vocab, PatchPair *pair) {
    gpt_alloc_inference(model, 1, pair->T);
    if (pair->clean_answer < 0) {
        pair->clean_answer = predicted_next(model, pair->clean, pair->T);
        pair->corrupt_answer = predicted_next(model, pair->corrupt, pair->T);
        char shown[16];
        if (pair->clean_answer == pair->corrupt_answer)
            usage_error("--patch: the model predicts '%s' next after both texts: nothing to "
                        "recover; choose texts whose predictions differ",
                        char_shown(vocab->code_points[pair->clean_answer], shown));
    }
    char err[600];
    if (!activation_patching(model, pair->clean, pair->corrupt, pair->T, pair->clean_answer,
                             pair->corrupt_answer, &pair->found, err, sizeof err))
        usage_error("--patch: %s", err);
}

static void free_patch_pair(PatchPair *pair) {
    free(pair->clean), free(pair->corrupt), free(pair->clean_chars), free(pair->corrupt_chars);
    free(pair->clean_text);
    patching_free(&pair->found);
    memset(pair, 0, sizeof *pair);
}

// ---- the output folder

// The record bin/attn keeps in every folder it writes (base/files.h): each
// file it wrote there, as it left it.
#define OUT_RECORD ".written-by-bin-attn"

// --out as this run found it: the record of the runs before (what bin/attn
// wrote there) and the files there before this run wrote any.
typedef struct {
    const char *out;
    FileList last, before;
} OutFolder;

// --out must be new, empty, or hold only what bin/attn wrote there, as it
// left it (its record), unless --force: a user's files are never replaced
// unasked.
static void check_out_folder(const AttnOptions *o, OutFolder *folder) {
    char err[4400], first[4400];
    folder->out = o->out;
    if (!written_record_read(o->out, OUT_RECORD, &folder->last, err, sizeof err)) die("%s", err);
    folder_listing(o->out, OUT_RECORD, &folder->before);
    if (o->force) return;
    int foreign = written_record_foreign(o->out, OUT_RECORD, &folder->last, first, sizeof first,
                                         err, sizeof err);
    if (foreign < 0) die("--out %s", err);
    char more[64] = "";
    if (foreign > 1) snprintf(more, sizeof more, " and %d more", foreign - 1);
    if (foreign > 0)
        die("--out %s: the folder holds files that bin/attn did not write (%s%s); give a new or "
            "empty folder, or --force to write into it", o->out, first, more);
}

// Record what bin/attn wrote in --out: the files this run wrote, and while
// it is not done, those the runs before wrote (they are still bin/attn's).
// Done, it removes those the runs before wrote and this one did not (a
// larger model's heads, an analysis not asked for again), each only while
// it is as bin/attn left it: never a file it did not write. A --force run
// records only what it wrote itself, so the user's files stay theirs.
// Returns 0 with a message in err.
static int record_out_folder(const OutFolder *folder, int done, char *err, size_t err_len) {
    FileList record;
    folder_changed_since(folder->out, OUT_RECORD, &folder->before, &record);
    int removed = 0;
    for (int i = 0; i < folder->last.count; i++) {
        const FileEntry *e = &folder->last.entries[i];
        if (file_list_find(&record, e->path) || !written_record_holds(folder->out, e)) continue;
        char path[8800];
        snprintf(path, sizeof path, "%s/%s", folder->out, e->path);
        if (done && remove(path) == 0) removed++;
        else file_list_add(&record, e->path, e);
    }
    // nothing written (a run that failed at its first file): no record either
    int ok = !record.count || written_record_write(folder->out, OUT_RECORD, "bin/attn", &record,
                                                   err, err_len);
    file_list_free(&record);
    if (ok && removed)
        printf("removed %d file%s an earlier run wrote in %s and this one did not\n", removed,
               removed == 1 ? "" : "s", folder->out);
    return ok;
}

static void record_out_folder_or_die(const OutFolder *folder, int done) {
    char err[4400];
    if (!record_out_folder(folder, done, err, sizeof err)) {
        set_fatal_hook(NULL); // recording is what failed
        die("%s", err);
    }
}

// A run that fails once it has written records what it wrote, so that the
// next may write there again.
static const OutFolder *out_folder_written;

static void record_before_exit(int exit_code, const char *message) {
    (void)exit_code, (void)message;
    set_fatal_hook(NULL);
    char err[4400];
    if (out_folder_written && !record_out_folder(out_folder_written, 0, err, sizeof err))
        fprintf(stderr, "warning: %s\n", err);
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
// What the analyses found, for the explorer; each part NULL when not asked for.
typedef struct {
    double *zero_loss, *mean_loss; // (units)
    double loss;
    long positions;
    int windows;
    double *zero_frozen_loss, *mean_frozen_loss; // (units) --freeze-patterns
    LensCell *lens;                // (L+1,T)
    Attribution *attributions;     // (T)
} Findings;

static void free_findings(Findings *f, int T) {
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

static void write_ablation(const AttnOptions *o, GPT *model, const PredictionWindow *window,
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
static LensCell *write_lens(const AttnOptions *o, GPT *model, const Vocab *vocab,
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
static Attribution *write_attribution(const AttnOptions *o, GPT *model, const Vocab *vocab,
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
static void write_patching(const AttnOptions *o, const PatchPair *pair,
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
    forward_threads(&model, o.threads);
    PatchPair pair = patch_pair(&o, &model, &vocab);
    if (o.patch && !o.text && !o.text_file) o.text = pair.clean_text;
    AttnText text = read_text(&o, &model, &vocab);
    PredictionWindow window = prediction_window(&o, &model, &vocab, &text);
    AblationWindows ablation_set = ablation_windows(&o, &model, &vocab, &window);
    struct stat out_stat;
    if (stat(o.out, &out_stat) == 0 && !S_ISDIR(out_stat.st_mode))
        die("--out %s: not a folder", o.out);
    ExplorerSnapshots snapshots = {0};
    if (o.html) snapshots = read_explorer_snapshots(&o, &model);
    OutFolder folder = {0};
    check_out_folder(&o, &folder);
    if (o.patch) run_patching(&model, &vocab, &pair);
    print_notes(&text);

    // from here on what is written is recorded, also when the run fails
    out_folder_written = &folder;
    set_fatal_hook(record_before_exit);
    HeadScores *scores = score_heads(&model, &vocab, &text);
    write_pictures(&o, &model, &vocab, &text, &heatmap, scores);
    record_out_folder_or_die(&folder, 0);
    float *attention = o.html ? text_attention(&model, text.T) : NULL;
    Findings found = {0};
    if (o.ablate) {
        write_ablation(&o, &model, &window, &ablation_set, &found);
        record_out_folder_or_die(&folder, 0);
    }
    if (o.lens) {
        found.lens = write_lens(&o, &model, &vocab, &window);
        record_out_folder_or_die(&folder, 0);
    }
    if (o.attribute_position >= 0)
        found.attributions = write_attribution(&o, &model, &vocab, &window);
    PatchingPicture patching = {0};
    if (o.patch) {
        record_out_folder_or_die(&folder, 0);
        patching = (PatchingPicture){&pair.found, pair.clean_chars, pair.corrupt_chars,
                                     vocab.code_points[pair.clean_answer],
                                     vocab.code_points[pair.corrupt_answer]};
        write_patching(&o, &pair, &patching);
    }
    ExplorerAnalyses analyses = {.T = window.T,
                                 .chars = window.chars,
                                 .code_points = vocab.code_points,
                                 .zero_loss = found.zero_loss,
                                 .mean_loss = found.mean_loss,
                                 .loss = found.loss,
                                 .positions = found.positions,
                                 .windows = found.windows,
                                 .lens = found.lens,
                                 .attributions = found.attributions,
                                 .chosen_position = o.attribute_position,
                                 .zero_frozen_loss = found.zero_frozen_loss,
                                 .mean_frozen_loss = found.mean_frozen_loss,
                                 .patching = o.patch ? &patching : NULL};
    if (o.html)
        write_explorer(&o, &model, text.window, text.T, attention, scores, &snapshots,
                       analyses_asked(&o) || o.patch ? &analyses : NULL);
    record_out_folder_or_die(&folder, 1);
    set_fatal_hook(NULL);

    file_list_free(&folder.last), file_list_free(&folder.before);
    free_findings(&found, window.T);
    free_patch_pair(&pair);
    free(attention);
    free(ablation_set.tokens), free(ablation_set.targets);
    free(window.tokens), free(window.targets);
    free_explorer_snapshots(&snapshots);
    free(scores);
    free(text.chars);
    gpt_free(&model);
    vocab_free(&vocab);
    return 0;
}
