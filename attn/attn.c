// attn.c: bin/attn, what every attention head attends to. Runs a checkpoint
// over a text and writes one heatmap per head (rows = query positions,
// columns = key positions), an overview of all heads, and optionally the raw
// probabilities. The pictures' layout is described in heatmap.h.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/vocab.h"
#include "../lib/checkpoint.h"
#include "../base/files.h"
#include "../base/util.h"
#include "../base/options.h"
#include "../viz/heatmap.h"

typedef struct {
    const char *ckpt, *text, *text_file, *out, *colormap;
    int layer, head, cell, raw;
} AttnOptions;

#define NUM_OPTIONS 9

static void option_table(AttnOptions *o, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--ckpt", OPT_STRING, &o->ckpt, "model checkpoint (.safetensors) from bin/train", 0, -1, 0},
        {"--text", OPT_STRING, &o->text, "the text to look at", 0, -1, 0},
        {"--text-file", OPT_STRING, &o->text_file, "read the text from this file", 0, -1, 0},
        {"--out", OPT_STRING, &o->out, "output folder (created with its parents)", 0, -1, 0},
        {"--layer", OPT_INT, &o->layer, "draw only this layer (-1: all)", -1, 100000, 0},
        {"--head", OPT_INT, &o->head, "draw only this head (-1: all)", -1, 100000, 0},
        {"--cell", OPT_INT, &o->cell, "pixels per cell (from 10 every character is labelled, below only some)",
         1, HEATMAP_MAX_CELL, 0},
        {"--colormap", OPT_STRING, &o->colormap, "viridis, magma or gray", 0, -1, 0},
        {"--raw", OPT_FLAG, &o->raw,
         "also write OUT/attention.safetensors: F32 attn [layers, heads, T, T], the text in its "
         "metadata", 0, -1, 0},
    };
    memcpy(t, table, sizeof table);
}

static AttnOptions default_options(void) {
    return (AttnOptions){.ckpt = "out/model.safetensors", .out = "attn_out",
                         .colormap = "viridis", .layer = -1, .head = -1,
                         .cell = HEATMAP_DEFAULT_CELL};
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

int main(int argc, char **argv) {
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
                      "and OUT/overview.png with every head. A text longer than the model's context\n"
                      "is cut to its last context characters.",
                      help_table, NUM_OPTIONS);
        return 0;
    }
    if (!parsed) usage_error("%s", err);
    if (o.text && o.text_file) usage_error("give --text or --text-file, not both");
    if (!o.text && !o.text_file) usage_error("give the text to look at: --text TEXT or --text-file FILE");
    HeatmapOptions heatmap = heatmap_default_options();
    heatmap.cell = o.cell;
    heatmap.raw = o.raw;
    heatmap.colormap = colormap_from_name(o.colormap);
    if (heatmap.colormap < 0)
        usage_error("--colormap: unknown colour map '%s' (viridis, magma or gray)", o.colormap);

    GPT model;
    Vocab vocab;
    if (!gpt_load(o.ckpt, &model, &vocab, err, sizeof err)) die("%s", err);
    int L = model.config.layers, NH = model.config.heads, context = model.config.context;
    if (o.layer >= L)
        usage_error("--layer %d is out of range: the model has %d layer%s (0..%d, or -1 for all)",
                    o.layer, L, L == 1 ? "" : "s", L - 1);
    if (o.head >= NH)
        usage_error("--head %d is out of range: the model has %d head%s (0..%d, or -1 for all)",
                    o.head, NH, NH == 1 ? "" : "s", NH - 1);
    heatmap.layer = o.layer;
    heatmap.head = o.head;

    size_t len;
    char *file_text = NULL;
    const char *text = o.text, *source = "--text";
    if (o.text_file) {
        file_text = read_whole_file(o.text_file, &len);
        text = file_text;
        source = o.text_file;
    } else {
        len = strlen(o.text);
    }
    int T;
    uint32_t *chars = decode_text(source, text, len, &vocab, &T);
    uint32_t *window = chars;
    if (T > context) {
        fprintf(stderr, "note: the text has %d characters, more than the model's context of %d: "
                "using the last %d\n", T, context, context);
        window = chars + (T - context);
        T = context;
    }
    if (!heatmaps_check_size(L, NH, T, o.cell, err, sizeof err)) usage_error("--cell: %s", err);

    int *tokens = xmalloc((size_t)T * sizeof(int));
    for (int i = 0; i < T; i++) tokens[i] = vocab_id(&vocab, window[i]);
    gpt_alloc_inference(&model, 1, T);
    gpt_forward(&model, tokens, NULL, 1, T);
    if (!heatmaps_write(o.out, &model, window, T, &heatmap, err, sizeof err)) die("%s", err);

    int images = (o.layer >= 0 ? 1 : L) * (o.head >= 0 ? 1 : NH);
    printf("%d characters: wrote %s/overview.png and %d head image%s%s\n", T, o.out, images,
           images == 1 ? "" : "s", o.raw ? " and attention.safetensors" : "");

    free(tokens);
    free(chars);
    free(file_text);
    gpt_free(&model);
    vocab_free(&vocab);
    return 0;
}
