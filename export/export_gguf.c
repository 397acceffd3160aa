// export_gguf.c: --to gguf, one file that llama.cpp runs: the tensors, the
// architecture's metadata and the vocabulary as llama.cpp's RWKV tokenizer.

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../base/options.h"
#include "../base/util.h"
#include "export.h"

// ---- the vocabulary
//
// llama.cpp's RWKV tokenizer: every token's bytes go into a trie, and text
// is split greedily by the longest token that matches its bytes; no
// normalisation, no merges, no space prefix, no BOS or EOS. Our tokens are
// single characters, so every character of a text becomes its own id, in
// any script, and a token detokenizes to its bytes. Its token text is
// escaped: '\\' as "\\\\", the control characters as "\\n", "\\t", "\\r" or
// "\\xNN" (lower-case hex, as llama.cpp reads it); the rest as UTF-8.
static char *rwkv_token_text(uint32_t code_point) {
    char utf8[5] = {0}, *text = xmalloc(8);
    if (code_point == '\\') snprintf(text, 8, "\\\\");
    else if (code_point == '\n') snprintf(text, 8, "\\n");
    else if (code_point == '\t') snprintf(text, 8, "\\t");
    else if (code_point == '\r') snprintf(text, 8, "\\r");
    else if (code_point < 0x20) snprintf(text, 8, "\\x%02x", (unsigned)code_point);
    else {
        utf8[utf8_encode(code_point, utf8)] = '\0';
        snprintf(text, 8, "%s", utf8);
    }
    return text;
}

// ---- --to gguf

// The architecture's keys ("llama.context_length", ...), as llama.cpp's
// gguf-py names them, from the block: its shape, the norm's epsilon under
// its kind's key (model/ops.c's, 1e-5), and with RoPE the base and the
// rotated dimensions (all of a head's). Every head has its own keys and
// values (head_count_kv = heads). Returns the count written into meta.
#define MAX_ARCH_META 10
static int architecture_meta(const Format *f, const GPTConfig *cfg, char keys[MAX_ARCH_META][64],
                             GgufMeta meta[MAX_ARCH_META]) {
    const struct {
        const char *key;
        double value;
        int is_float, used;
    } rows[MAX_ARCH_META] = {
        {"context_length", cfg->context, 0, 1},
        {"embedding_length", cfg->dim, 0, 1},
        {"block_count", cfg->layers, 0, 1},
        {"feed_forward_length", gpt_mlp_hidden(cfg), 0, 1},
        {"attention.head_count", cfg->heads, 0, 1},
        {"attention.head_count_kv", cfg->heads, 0, 1},
        {"attention.layer_norm_epsilon", 1e-5, 1, cfg->norm == NORM_LAYERNORM},
        {"attention.layer_norm_rms_epsilon", 1e-5, 1, cfg->norm == NORM_RMSNORM},
        {"rope.freq_base", cfg->rope_base, 1, cfg->pos == POS_ROPE},
        {"rope.dimension_count", cfg->dim / cfg->heads, 0, cfg->pos == POS_ROPE},
    };
    int n = 0;
    for (int i = 0; i < MAX_ARCH_META; i++) {
        if (!rows[i].used) continue;
        snprintf(keys[n], 64, "%s.%s", f->name, rows[i].key);
        meta[n] = rows[i].is_float ? gguf_meta_f32(keys[n], (float)rows[i].value)
                                   : gguf_meta_u32(keys[n], (uint32_t)rows[i].value);
        n++;
    }
    return n;
}

// A finite weight beyond f16's largest, 65,504 (one that rounds to inf),
// is refused, naming our tensor and the value: the exported
// model would compute other numbers than ours. (A NaN or inf is already
// one: main warns of those.) Only GGUF's f16 tensors need this, whose rows
// are their parts' in order (no transposition).
static void refuse_f16_overflow(const char *path, const Exported *e) {
    long width = e->cols ? e->cols : 1, size = e->rows * width;
    for (long i = 0; i < size; i++) {
        float v = e->data[i];
        if (!isfinite(v) || (gguf_f32_to_f16(v) & 0x7FFFu) != 0x7C00u) continue;
        long row = i / width, part = 0;
        while (part < e->num_parts - 1 && row >= e->part_rows[part]) row -= e->part_rows[part++];
        char name[96];
        if (e->layer >= 0)
            snprintf(name, sizeof name, "h.%d.%s", e->layer, param_specs[e->parts[part]].name);
        else snprintf(name, sizeof name, "%s", param_specs[e->parts[part]].name);
        die("%s: tensor '%s' holds %g, beyond f16's largest, 65504: as %s in f16 it would be "
            "%sinf; --dtype bf16 or f32 keeps it",
            path, name, (double)v, e->name, v < 0 ? "-" : "");
    }
}

void write_gguf(const ExportOptions *o, const GPT *model, const Vocab *vocab,
                       const Format *f, GgmlType dtype) {
    int V = vocab->size;
    char **tokens = xmalloc(sizeof(char *) * (size_t)V);
    int32_t *token_types = xmalloc(sizeof(int32_t) * (size_t)V);
    for (int id = 0; id < V; id++) {
        tokens[id] = rwkv_token_text(vocab->code_points[id]);
        token_types[id] = 1; // normal
    }
    // general.file_type: llama.cpp's llama_ftype (ALL_F32, MOSTLY_F16, MOSTLY_BF16)
    uint32_t file_type = dtype == GGML_TYPE_F32 ? 0 : dtype == GGML_TYPE_F16 ? 1 : 32;
    GgufMeta meta[9 + MAX_ARCH_META] = {
        gguf_meta_string("general.architecture", f->name),
        gguf_meta_string("general.name", "tinygpt-c"),
        gguf_meta_u32("general.file_type", file_type),
        gguf_meta_u32("general.alignment", GGUF_DEFAULT_ALIGNMENT),
        gguf_meta_string("tokenizer.ggml.model", "rwkv"),
        gguf_meta_strings("tokenizer.ggml.tokens", (const char *const *)tokens, (uint64_t)V),
        gguf_meta_i32s("tokenizer.ggml.token_type", token_types, (uint64_t)V),
        gguf_meta_bool("tokenizer.ggml.add_bos_token", 0),
        gguf_meta_bool("tokenizer.ggml.add_eos_token", 0),
    };
    char keys[MAX_ARCH_META][64];
    int num_meta = 9 + architecture_meta(f, &model->config, keys, meta + 9);
    Exported *exported;
    int n = make_tensors(o->ckpt, model, f, &exported);
    GgufTensor *tensors = xcalloc((size_t)n, sizeof(GgufTensor));
    for (int i = 0; i < n; i++) {
        const Exported *e = &exported[i];
        // vectors (norms, biases) stay F32, as llama.cpp's own converter keeps them
        tensors[i] = (GgufTensor){.name = e->name, .data = e->data, .ndim = e->is_matrix ? 2 : 1,
                                  .type = e->is_matrix ? dtype : GGML_TYPE_F32};
        tensors[i].shape[0] = e->rows;
        tensors[i].shape[1] = e->cols;
    }
    if (dtype == GGML_TYPE_F16)
        for (int i = 0; i < n; i++)
            if (exported[i].is_matrix) refuse_f16_overflow(o->ckpt, &exported[i]);
    char err[1024];
    int ok = gguf_write(o->out, meta, num_meta, tensors, n, err, sizeof err);
    free(tensors);
    free_tensors(exported, n);
    for (int id = 0; id < V; id++) free(tokens[id]);
    free(tokens);
    free(token_types);
    if (!ok) die("%s", err);
}

