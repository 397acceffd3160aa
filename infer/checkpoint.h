// checkpoint.h: a GPT and its vocabulary as a safetensors file that PyTorch
// loads with no reshaping. Tensor names and shapes are the rows of
// GPT_PARAMETER_TENSORS (model/gpt.h), per block as "h.{i}.NAME": wte [V,C],
// wpe [T,C], h.{i}.ln_1.weight [C], h.{i}.attn.w_q.weight [C,C], ...,
// h.{i}.mlp.fc.weight [4C,C], ..., ln_f.bias [C].
// Metadata: format_version "1", config {"layers","heads","dim","context",
// "vocab_size"} as JSON, vocab: the code points in id order as a JSON array
// of one-character strings, strictly increasing, except in a fine-tuned
// model's checkpoint (bin/train --init-from), whose new characters follow
// the sorted ones, marked by vocab_order "appended" (then the code points
// need only be distinct).
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include <stddef.h>

#include "../data/vocab.h"
#include "../model/gpt.h"

#define CHECKPOINT_FORMAT_VERSION "1"

// Atomic write of the model's parameters. Returns 0 with a message on error.
int gpt_save(const char *path, const GPT *model, const Vocab *vocab, char *err, size_t err_len);
// Load a checkpoint: validates everything, builds the model (gpt_build)
// from the stored config and fills its parameters and the vocabulary.
// Returns 0 with a message naming the file and the problem on error, with
// nothing left allocated.
int gpt_load(const char *path, GPT *model, Vocab *vocab, char *err, size_t err_len);

#endif
