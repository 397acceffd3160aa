// explorer.h: the attention explorer, one self-contained HTML file: the
// data embedded as JSON (attention as base64 little-endian float32), plain
// JavaScript drawing on a canvas, and a Content-Security-Policy that allows
// no network request of any kind, so it opens from the file system and
// works offline. Choose a head or the overview; hover a cell to read query
// and key characters, positions and weight; click a character of the text
// to highlight its row and column; the scores table beside; a slider
// through training snapshots when there are any.
//
// A URL fragment selects as a click would: #view=V&layer=L&head=H&q=I&k=J
// (all optional) sets the readout (id "readout", its weight also in
// data-weight) to cell (I, J) of that head. After loading, the page's body
// carries data-ready="1" and data-resources = the number of resources the
// browser fetched (performance timing), which should be 0.
#ifndef ATTN_EXPLORER_H
#define ATTN_EXPLORER_H

#include <stddef.h>
#include <stdint.h>

#include "../interpret/interpret.h"
#include "patching_chart.h"
#include "scores.h"

typedef struct {
    const char *label;        // "your text" or "step 500"
    long step;                // -1 for the text given to bin/attn
    double loss;              // NAN if unknown
    int T;
    const uint32_t *chars;    // (T)
    const float *attn;        // (L, NH, T, T)
    const HeadScores *scores; // (L*NH)
    double icl, sink_rate;    // a snapshot's ICL score and attention-sink rate, NAN if unknown
} ExplorerView;

// What bin/attn --ablate, --lens, --attribute-position and --patch found,
// for the page's views under the heads: the ablation grid (zero or mean, hover for
// the losses), the logit lens (hover for the probabilities, click a column
// to choose its position) and the attribution bars of the chosen position.
// Each part NULL when it was not asked for. Without analyses (NULL) the
// page is byte for byte what it was before they existed.
typedef struct {
    int T;                         // predictions in the window (0 with --patch alone)
    const uint32_t *chars;         // (T + 1) the window's characters (NULL with --patch alone)
    const uint32_t *code_points;   // (V) each id's character
    // ablation, units in interpret.h's order
    const double *zero_loss, *mean_loss;
    double loss;
    long positions;
    int windows;
    const LensCell *lens;          // (L+1,T)
    const Attribution *attributions; // (T) one per position
    int chosen_position;           // shown first
    // --ablate --freeze-patterns: the ablated losses with the later heads'
    // patterns frozen (interpret.h), units as above; else NULL
    const double *zero_frozen_loss, *mean_frozen_loss;
    // --patch: the recovery of each head and each (block, position) of the
    // stream, as patching_chart.h draws it; else NULL
    const PatchingPicture *patching;
} ExplorerAnalyses;

// With patterns frozen, the ablation's choice (id "ablationkind") also
// offers the frozen losses. The patching view: a table of the heads (id
// "patch-heads", each cell data-layer, data-head, data-recovery) and one of
// the stream (id "patch-stream", each cell data-layer, data-pos,
// data-recovery), both on the diverging colours, the clean text above the
// stream's columns and the corrupted characters under those that differ.
//
// Write the page to path (atomically). Returns 0 with a message.
// analyses may be NULL. A fragment #pos=P chooses the attribution's
// position (its box, id "attribution", carries data-position,
// data-logit-diff and data-total; each bar data-part and data-value).
// For a block other than GPT-2's a note above the box (id
// "attribution-note") says what the parts are of (interpret.h: RMSNorm's
// uncentred parts, no position part under RoPE, the logits before a
// softcap); RoPE's attributions have no "position embedding" bar.
int explorer_write(const char *path, int layers, int heads, const ExplorerView *views,
                   int num_views, const ExplorerAnalyses *analyses, char *err, size_t err_len);

#endif
