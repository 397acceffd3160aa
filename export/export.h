// export.h: bin/export's parts: the targets and their formats
// (export_formats.c), --to gguf's file (export_gguf.c), --to hf's folder
// (export_hf.c); export.c checks what --out may replace and runs them.
#ifndef EXPORT_H
#define EXPORT_H

#include "../base/gguf.h"
#include "../data/vocab.h"
#include "../model/gpt.h"

// ---- the targets

typedef enum { TARGET_GGUF, TARGET_HF } Target;
extern const char *const target_names[2];

typedef struct {
    const char *ckpt, *to, *out, *dtype;
    int force;
} ExportOptions;

// ---- the formats: each target's architectures, and their tensors
//
// A target tensor is made from our tensors, named by our checkpoint names
// (model/gpt.h's table, without "h.{l}." for the per-block ones, which the
// target has once per block under its block prefix).

typedef enum {
    ROWS_ALL,         // every row of the parts, stacked
    ROWS_FIRST_HALF,  // SwiGLU's gate: fc's first H rows (and its bias's)
    ROWS_SECOND_HALF, // SwiGLU's up: the next H
} RowRange;

typedef enum {
    ORDER_AS_IS,
    // Hugging Face's GPT-2 keeps its products as Conv1D, y = x W + b with W
    // [in, out]: ours transposed
    ORDER_TRANSPOSED,
    // Our RoPE rotates each head's interleaved pairs (2i, 2i+1) by
    // pos * base^(-2i/hs); llama.cpp's NEOX rope (qwen3) and transformers'
    // rotate-half rotate (i, i + hs/2) by the same angle. Each head's rows
    // of W_Q, W_K, their biases and the q/k norms' gains are reordered
    // 0, 2, 4, ..., 1, 3, 5, ...: the rotation then turns the same numbers,
    // and the scores q.k, a sum over the same products, are unchanged.
    ORDER_HALVES,
} RowOrder;

typedef struct {
    const char *name;
    const char *parts[3];
    RowRange rows;
    RowOrder order;
} TargetTensor;

typedef enum { ARCH_GPT2, ARCH_LLAMA, ARCH_QWEN3 } Architecture;

typedef struct {
    Target target;
    Architecture arch;
    const char *name;  // general.architecture, or config.json's model_type
    const char *title; // as an error names it
    // the block it expresses
    NormKind norm;
    PositionKind pos;
    MlpKind mlp;
    int qk_norm;
    const TargetTensor *tensors;
    int count;
    const char *block_prefix; // before a block's tensor names ("%d": the block)
    // Ours that it has no place for: biases it does not add, so exported
    // only when zero (adding zero is no change); else refused, naming the
    // option that chose it and why.
    const char *absent[4];
    const char *chosen_by, *absent_why;
} Format;

// One target tensor, made: row-major fp32 data (a view into the model, or
// `owned`) and its shape, rows x cols (cols 0 for a vector); rows 0 when
// its parts have none (a tensor the config does not use: not written).
typedef struct {
    char name[GGUF_MAX_NAME];
    const float *data;
    float *owned;
    long rows, cols;
    int is_matrix;
    // where its rows come from: parts[i] (of block `layer`, -1 when not
    // per block) gives part_rows[i] rows, in order
    int parts[3], num_parts, layer;
    long part_rows[3];
} Exported;

// The format of `target` that expresses the block of cfg; dies with one line
// naming the first of its options that no format of the target expresses:
// a choice whose row (gpt.h) says why the target cannot hold it, then the
// formats' own.
const Format *choose_format(const char *path, const GPTConfig *cfg, Target target);
// The config's keys: the shape's and the block's choices' (gpt.h), which
// gpt_load reads into GPTConfig; a key bin/export does not know may describe
// a block it cannot tell (a newer program's), so it is refused.
void check_config_keys(const char *path, Target target);
// A checkpoint may hold tensors its config does not use (lm_head.weight
// with a tied head, wpe with RoPE, query and key norms without --qk-norm):
// the model loaded without them is what bin/sample runs, and what is
// exported; a warning names them, so none is dropped unsaid. They are
// looked for with the shape a config using them gives them.
void warn_unused_tensors(const char *path, const GPTConfig *cfg);
// Every target tensor of the model, non-block ones first, then block 0's,
// 1's, ...; a tensor the config does not use (0 rows) is not there. Returns
// the count.
int make_tensors(const char *path, const GPT *model, const Format *f, Exported **out);
void free_tensors(Exported *tensors, int n);

void write_gguf(const ExportOptions *o, const GPT *model, const Vocab *vocab, const Format *f,
                GgmlType dtype);
// The hf folder's files are written into a folder beside --out,
// "OUT.tmp.PID", which only when whole takes its place: renamed to OUT, or
// with --force exchanged with the old folder (renameat2, Linux), which is
// then removed; elsewhere the old folder is first renamed "OUT.old.PID".
// A failure, or a kill, at any point leaves the old folder (or none) at
// OUT, never a part of the new one.
void write_hf(const ExportOptions *o, const GPT *model, const Vocab *vocab, const Format *f);
int is_hf_file(const char *name);
// The hf folder's files (hf_files, with their temporaries) removed from
// dir, then dir itself; a folder holding anything else is left as it is.
void remove_hf_folder(const char *dir);

#endif
