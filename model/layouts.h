// layouts.h: what gpt.c's buffer layouts give the forward and the backward
// (transformer.c). Internal to model/, not gpt.h's API.
#ifndef LAYOUTS_H
#define LAYOUTS_H

#include "gpt.h"

// The width of the MLP's first product, GATES*H (fc_w's rows).
double mlp_inputs(const GPTConfig *cfg);
// The saved activations for a batch of B x T (a training model's or an
// inference model's, gpt.h: Attention probabilities): views pointed into
// memory, or with memory NULL only the floats counted; returns the floats.
double activation_layout(const GPTConfig *cfg, Activations *a, int B, int T, int training,
                         float *memory);

#endif
