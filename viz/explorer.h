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

#include "scores.h"

typedef struct {
    const char *label;        // "your text" or "step 500"
    long step;                // -1 for the text given to bin/attn
    double loss;              // NAN if unknown
    int T;
    const uint32_t *chars;    // (T)
    const float *attn;        // (L, NH, T, T)
    const HeadScores *scores; // (L*NH)
} ExplorerView;

// Write the page to path (atomically). Returns 0 with a message.
int explorer_write(const char *path, int layers, int heads, const ExplorerView *views,
                   int num_views, char *err, size_t err_len);

#endif
