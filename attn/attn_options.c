// attn_options.c: bin/attn's option table, --help, and the flags' checks.
#include "attn_options.h"

#include <stdio.h>
#include <string.h>

#include "../base/options.h"

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
AttnOptions parse_options(int argc, char **argv) {
    AttnOptions o = default_options(), defaults = default_options();
    Option table[NUM_OPTIONS], help_table[NUM_OPTIONS];
    option_table(&o, table);
    option_table(&defaults, help_table);
    options_parse_or_exit(table, help_table, NUM_OPTIONS, USAGE, NULL, 0, argc, argv);
    precision_choose(o.precision, &o.products, &o.bf16);
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
HeatmapOptions heatmap_options(const AttnOptions *o) {
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
