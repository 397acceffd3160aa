// attn_options.h: bin/attn's flags, their defaults, --help and the checks
// made before anything is read.
#ifndef ATTN_OPTIONS_H
#define ATTN_OPTIONS_H

#include "../kernels/matmul.h"
#include "../viz/heatmap.h"

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

// The flags, parsed and checked (--help prints the usage and exits 0);
// --precision takes effect here.
AttnOptions parse_options(int argc, char **argv);
// The pictures' settings from the flags (each head's tag comes with the scores).
HeatmapOptions heatmap_options(const AttnOptions *o);

#endif
