// attribution_chart.h: which heads wrote one prediction, as a bar chart
// (interpret/interpret.h computes the parts). One bar per part of the final
// stream: the token and position embeddings (with RoPE the position's row
// says there is none), each head and each layer's MLP in layer order, the
// rest (the b_O biases, and ln_f's bias when it is a LayerNorm); then their
// sum and the model's logit difference (before the cap, with a softcap),
// which it should equal. Bars grow from a zero line, red for what raises
// logit(next) - logit(other), blue for what lowers it, each with its value.
#ifndef ATTN_ATTRIBUTION_CHART_H
#define ATTN_ATTRIBUTION_CHART_H

#include <stddef.h>
#include <stdint.h>

#include "../interpret/interpret.h"
#include "draw.h"

// current: the character at the position; next and other: those of
// a->target and a->other.
void attribution_render(Image *image, const Attribution *a, uint32_t current, uint32_t next,
                        uint32_t other);
int attribution_write_png(const char *path, const Attribution *a, uint32_t current, uint32_t next,
                          uint32_t other, char *err, size_t err_len);

#endif
