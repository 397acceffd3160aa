// export_formats.c: each target's architectures as data, the one chosen
// from a checkpoint's config, and each of its tensors made from ours.

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/options.h"
#include "../base/safetensors.h"
#include "../base/util.h"
#include "export.h"

// ---- the formats: each target's architectures, and their tensors
//
// A target tensor is made from our tensors, named by our checkpoint names
// (model/gpt.h's table, without "h.{l}." for the per-block ones, which the
// target has once per block under its block prefix).

#define TENSORS(table) table, (int)(sizeof table / sizeof table[0])

// llama.cpp's gpt2 (src/models/gpt2.cpp): LayerNorms with biases, learned
// positions, GELU, a bias on every product; output.weight when the head is
// untied, else token_embd is the head.
static const TargetTensor GGUF_GPT2[] = {
    {"token_embd.weight", {"wte"}, ROWS_ALL, ORDER_AS_IS},
    {"position_embd.weight", {"wpe"}, ROWS_ALL, ORDER_AS_IS},
    {"output_norm.weight", {"ln_f.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"output_norm.bias", {"ln_f.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"output.weight", {"lm_head.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_norm.weight", {"ln_1.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_norm.bias", {"ln_1.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_qkv.weight", {"attn.w_q.weight", "attn.w_k.weight", "attn.w_v.weight"}, ROWS_ALL,
     ORDER_AS_IS},
    {"attn_qkv.bias", {"attn.w_q.bias", "attn.w_k.bias", "attn.w_v.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_output.weight", {"attn.w_o.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_output.bias", {"attn.w_o.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_norm.weight", {"ln_2.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_norm.bias", {"ln_2.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_up.weight", {"mlp.fc.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_up.bias", {"mlp.fc.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_down.weight", {"mlp.proj.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_down.bias", {"mlp.proj.bias"}, ROWS_ALL, ORDER_AS_IS},
};

// llama.cpp's llama (src/models/llama.cpp): RMSNorms (gains only), its
// "normal" rope, which rotates the interleaved pairs ours does, SwiGLU
// silu(gate) * up. Its loader takes the optional biases attn_q, attn_k,
// attn_v (create_tensor_qkv), attn_output, ffn_gate, ffn_up and ffn_down,
// and its graph adds each one that is there (build_qkv, build_attn,
// build_ffn): every bias of ours.
static const TargetTensor GGUF_LLAMA[] = {
    {"token_embd.weight", {"wte"}, ROWS_ALL, ORDER_AS_IS},
    {"output_norm.weight", {"ln_f.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"output.weight", {"lm_head.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_norm.weight", {"ln_1.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_q.weight", {"attn.w_q.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_q.bias", {"attn.w_q.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_k.weight", {"attn.w_k.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_k.bias", {"attn.w_k.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_v.weight", {"attn.w_v.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_v.bias", {"attn.w_v.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_output.weight", {"attn.w_o.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_output.bias", {"attn.w_o.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_norm.weight", {"ln_2.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_gate.weight", {"mlp.fc.weight"}, ROWS_FIRST_HALF, ORDER_AS_IS},
    {"ffn_gate.bias", {"mlp.fc.bias"}, ROWS_FIRST_HALF, ORDER_AS_IS},
    {"ffn_up.weight", {"mlp.fc.weight"}, ROWS_SECOND_HALF, ORDER_AS_IS},
    {"ffn_up.bias", {"mlp.fc.bias"}, ROWS_SECOND_HALF, ORDER_AS_IS},
    {"ffn_down.weight", {"mlp.proj.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_down.bias", {"mlp.proj.bias"}, ROWS_ALL, ORDER_AS_IS},
};

// llama.cpp's qwen3 (src/models/qwen3.cpp): llama's block with each head's
// queries and keys RMS-normalised with a gain (attn_q_norm, attn_k_norm:
// hs, shared by the heads) before its rope, which is NEOX's (ORDER_HALVES).
// Its loader takes the optional attn_q, attn_k and attn_v biases, but no
// attn_output or FFN biases (its graph passes none).
static const TargetTensor GGUF_QWEN3[] = {
    {"token_embd.weight", {"wte"}, ROWS_ALL, ORDER_AS_IS},
    {"output_norm.weight", {"ln_f.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"output.weight", {"lm_head.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_norm.weight", {"ln_1.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_q.weight", {"attn.w_q.weight"}, ROWS_ALL, ORDER_HALVES},
    {"attn_q.bias", {"attn.w_q.bias"}, ROWS_ALL, ORDER_HALVES},
    {"attn_k.weight", {"attn.w_k.weight"}, ROWS_ALL, ORDER_HALVES},
    {"attn_k.bias", {"attn.w_k.bias"}, ROWS_ALL, ORDER_HALVES},
    {"attn_v.weight", {"attn.w_v.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_v.bias", {"attn.w_v.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"attn_q_norm.weight", {"attn.q_norm.weight"}, ROWS_ALL, ORDER_HALVES},
    {"attn_k_norm.weight", {"attn.k_norm.weight"}, ROWS_ALL, ORDER_HALVES},
    {"attn_output.weight", {"attn.w_o.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_norm.weight", {"ln_2.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ffn_gate.weight", {"mlp.fc.weight"}, ROWS_FIRST_HALF, ORDER_AS_IS},
    {"ffn_up.weight", {"mlp.fc.weight"}, ROWS_SECOND_HALF, ORDER_AS_IS},
    {"ffn_down.weight", {"mlp.proj.weight"}, ROWS_ALL, ORDER_AS_IS},
};

// transformers' GPT2LMHeadModel as save_pretrained writes it: its GPT2Model
// under "transformer.", lm_head.weight only when untied.
static const TargetTensor HF_GPT2[] = {
    {"transformer.wte.weight", {"wte"}, ROWS_ALL, ORDER_AS_IS},
    {"transformer.wpe.weight", {"wpe"}, ROWS_ALL, ORDER_AS_IS},
    {"transformer.ln_f.weight", {"ln_f.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"transformer.ln_f.bias", {"ln_f.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"lm_head.weight", {"lm_head.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ln_1.weight", {"ln_1.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ln_1.bias", {"ln_1.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"attn.c_attn.weight", {"attn.w_q.weight", "attn.w_k.weight", "attn.w_v.weight"}, ROWS_ALL,
     ORDER_TRANSPOSED},
    {"attn.c_attn.bias", {"attn.w_q.bias", "attn.w_k.bias", "attn.w_v.bias"}, ROWS_ALL,
     ORDER_AS_IS},
    {"attn.c_proj.weight", {"attn.w_o.weight"}, ROWS_ALL, ORDER_TRANSPOSED},
    {"attn.c_proj.bias", {"attn.w_o.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"ln_2.weight", {"ln_2.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"ln_2.bias", {"ln_2.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"mlp.c_fc.weight", {"mlp.fc.weight"}, ROWS_ALL, ORDER_TRANSPOSED},
    {"mlp.c_fc.bias", {"mlp.fc.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"mlp.c_proj.weight", {"mlp.proj.weight"}, ROWS_ALL, ORDER_TRANSPOSED},
    {"mlp.c_proj.bias", {"mlp.proj.bias"}, ROWS_ALL, ORDER_AS_IS},
};

// transformers' LlamaForCausalLM (modeling_llama): nn.Linear's [out, in],
// as ours; its LlamaModel under "model.", lm_head.weight only when untied;
// biases on q, k, v and o (attention_bias) and on gate, up and down
// (mlp_bias); rotate-half RoPE (ORDER_HALVES).
static const TargetTensor HF_LLAMA[] = {
    {"model.embed_tokens.weight", {"wte"}, ROWS_ALL, ORDER_AS_IS},
    {"model.norm.weight", {"ln_f.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"lm_head.weight", {"lm_head.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"input_layernorm.weight", {"ln_1.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"self_attn.q_proj.weight", {"attn.w_q.weight"}, ROWS_ALL, ORDER_HALVES},
    {"self_attn.q_proj.bias", {"attn.w_q.bias"}, ROWS_ALL, ORDER_HALVES},
    {"self_attn.k_proj.weight", {"attn.w_k.weight"}, ROWS_ALL, ORDER_HALVES},
    {"self_attn.k_proj.bias", {"attn.w_k.bias"}, ROWS_ALL, ORDER_HALVES},
    {"self_attn.v_proj.weight", {"attn.w_v.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"self_attn.v_proj.bias", {"attn.w_v.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"self_attn.o_proj.weight", {"attn.w_o.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"self_attn.o_proj.bias", {"attn.w_o.bias"}, ROWS_ALL, ORDER_AS_IS},
    {"post_attention_layernorm.weight", {"ln_2.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"mlp.gate_proj.weight", {"mlp.fc.weight"}, ROWS_FIRST_HALF, ORDER_AS_IS},
    {"mlp.gate_proj.bias", {"mlp.fc.bias"}, ROWS_FIRST_HALF, ORDER_AS_IS},
    {"mlp.up_proj.weight", {"mlp.fc.weight"}, ROWS_SECOND_HALF, ORDER_AS_IS},
    {"mlp.up_proj.bias", {"mlp.fc.bias"}, ROWS_SECOND_HALF, ORDER_AS_IS},
    {"mlp.down_proj.weight", {"mlp.proj.weight"}, ROWS_ALL, ORDER_AS_IS},
    {"mlp.down_proj.bias", {"mlp.proj.bias"}, ROWS_ALL, ORDER_AS_IS},
};

static const Format FORMATS[] = {
    {TARGET_GGUF, ARCH_GPT2, "gpt2", "llama.cpp's gpt2 architecture", NORM_LAYERNORM, POS_LEARNED,
     MLP_GELU, 0, TENSORS(GGUF_GPT2), "blk.%d.", {NULL}, NULL, NULL},
    {TARGET_GGUF, ARCH_LLAMA, "llama", "llama.cpp's llama architecture", NORM_RMSNORM, POS_ROPE,
     MLP_SWIGLU, 0, TENSORS(GGUF_LLAMA), "blk.%d.", {NULL}, NULL, NULL},
    {TARGET_GGUF, ARCH_QWEN3, "qwen3", "llama.cpp's qwen3 architecture", NORM_RMSNORM, POS_ROPE,
     MLP_SWIGLU, 1, TENSORS(GGUF_QWEN3), "blk.%d.",
     {"attn.w_o.bias", "mlp.fc.bias", "mlp.proj.bias"}, "--qk-norm",
     "(the one with per-head query and key norms) adds no bias after W_O or in the MLP"},
    {TARGET_HF, ARCH_GPT2, "gpt2", "transformers' GPT2LMHeadModel", NORM_LAYERNORM, POS_LEARNED,
     MLP_GELU, 0, TENSORS(HF_GPT2), "transformer.h.%d.", {NULL}, NULL, NULL},
    {TARGET_HF, ARCH_LLAMA, "llama", "transformers' LlamaForCausalLM", NORM_RMSNORM, POS_ROPE,
     MLP_SWIGLU, 0, TENSORS(HF_LLAMA), "model.layers.%d.", {NULL}, NULL, NULL},
};
#define NUM_FORMATS (int)(sizeof FORMATS / sizeof FORMATS[0])

// ---- the format, chosen from the checkpoint's config in one place

static const char *const norm_titles[] = {"LayerNorm", "RMSNorm"};
static const char *const pos_titles[] = {"learned positions", "RoPE"};
static const char *const mlp_titles[] = {"GELU", "ReLU^2", "SwiGLU"};

// The format of `target` that expresses the block of cfg; dies with one line
// naming the first of its options that no format of the target expresses:
// a choice whose row (gpt.h) says why the target cannot hold it, then the
// formats' own.
const Format *choose_format(const char *path, const GPTConfig *cfg, Target target) {
    const char *to = target_names[target];
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) {
        const BlockChoice *c = &gpt_block_choices[i];
        if (!c->export_refusal[target] || gpt_choice_get(cfg, i) == 0) continue;
        char value[64] = "";
        if (c->kind != CHOICE_FLAG) gpt_choice_text(cfg, i, value, sizeof value);
        die("%s: %s%s%s cannot be exported to %s: %s", path, c->flag, *value ? " " : "", value, to,
            c->export_refusal[target]);
    }
    // narrowed down by positions, then the norm, then query and key norms
    const Format *by_pos = NULL, *by_norm = NULL, *chosen = NULL;
    for (int i = 0; i < NUM_FORMATS; i++) {
        const Format *f = &FORMATS[i];
        if (f->target != target || f->pos != cfg->pos) continue;
        if (!by_pos) by_pos = f;
        if (f->norm != cfg->norm) continue;
        if (!by_norm) by_norm = f;
        if (f->qk_norm == cfg->qk_norm && !chosen) chosen = f;
    }
    char pos[32], norm[32], mlp[32];
    gpt_choice_text(cfg, CHOICE_pos, pos, sizeof pos);
    gpt_choice_text(cfg, CHOICE_norm, norm, sizeof norm);
    gpt_choice_text(cfg, CHOICE_mlp, mlp, sizeof mlp);
    if (!by_pos) die("%s: --pos %s cannot be exported to %s", path, pos, to);
    if (!by_norm) {
        // LayerNorm with RoPE, or RMSNorm with learned positions: the flag
        // that departs from GPT-2's block is named, with the other
        int rope = cfg->pos == POS_ROPE;
        char named[64], other[64];
        snprintf(named, sizeof named, rope ? "--pos %s" : "--norm %s", rope ? pos : norm);
        snprintf(other, sizeof other, rope ? "--norm %s" : "--pos %s", rope ? norm : pos);
        die("%s: %s cannot be exported to %s with %s: %s, the one with %s, normalises by %s", path,
            named, to, other, by_pos->title, pos_titles[cfg->pos], norm_titles[by_pos->norm]);
    }
    if (!chosen)
        die("%s: --qk-norm cannot be exported to %s: %s has no query and key norms", path, to,
            by_norm->title);
    if (chosen->mlp != cfg->mlp)
        die("%s: --mlp %s cannot be exported to %s: %s's MLP is %s", path, mlp, to, chosen->title,
            mlp_titles[chosen->mlp]);
    return chosen;
}

// The config's keys: the shape's and the block's choices' (gpt.h), which
// gpt_load reads into GPTConfig; a key bin/export does not know may describe
// a block it cannot tell (a newer program's), so it is refused.
void check_config_keys(const char *path, Target target) {
    static const char *const shape[] = {"layers", "heads", "dim", "context", "vocab_size"};
    char err[1024];
    StFile *file = safetensors_open(path, err, sizeof err);
    if (!file) die("%s", err);
    const char *text = safetensors_meta(file, "config");
    if (!safetensors_meta(file, "format_version") || !text)
        die("%s: no format_version or config in its metadata: not a checkpoint of bin/train", path);
    cJSON *config = cJSON_Parse(text);
    if (!cJSON_IsObject(config)) die("%s: its config is not a JSON object", path);
    for (const cJSON *item = config->child; item; item = item->next) {
        int is_known = 0;
        for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++)
            is_known |= !strcmp(item->string, shape[i]);
        for (int i = 0; i < NUM_BLOCK_CHOICES; i++)
            is_known |= !strcmp(item->string, gpt_block_choices[i].key);
        if (is_known) continue;
        char key[64];
        snprintf(key, sizeof key, "%s", item->string);
        safetensors_printable(key);
        die("%s: config key '%s' is not one bin/export knows, so it cannot be exported to %s", path,
            key, target_names[target]);
    }
    cJSON_Delete(config);
    safetensors_close(file);
}

// A checkpoint may hold tensors its config does not use (lm_head.weight
// with a tied head, wpe with RoPE, query and key norms without --qk-norm):
// the model loaded without them is what bin/sample runs, and what is
// exported; a warning names them, so none is dropped unsaid. They are
// looked for with the shape a config using them gives them.
void warn_unused_tensors(const char *path, const GPTConfig *cfg) {
    GPTConfig using_all = *cfg;
    using_all.pos = POS_LEARNED, using_all.norm = NORM_LAYERNORM;
    using_all.qk_norm = 1, using_all.untie = 1;
    char err[1024], names[1024] = "";
    StFile *file = safetensors_open(path, err, sizeof err);
    if (!file) die("%s", err);
    int count = 0;
    for (int p = 0; p < NUM_PARAM_TENSORS; p++) {
        long rows, cols, shape[2];
        param_shape(cfg, p, &rows, &cols);
        if (rows > 0) continue;
        param_shape(&using_all, p, &shape[0], &shape[1]);
        char name[96];
        snprintf(name, sizeof name, "%s%s", param_specs[p].stacked ? "h.0." : "",
                 param_specs[p].name);
        if (shape[0] == 0 ||
            !safetensors_check_f32(file, name, shape[1] ? 2 : 1, shape, err, sizeof err))
            continue;
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", count++ ? ", " : "", name);
    }
    safetensors_close(file);
    if (count)
        fprintf(stderr, "warning: %s holds %s, which its config does not use; not exported (the "
                "model bin/sample runs has %s)\n",
                path, names, count > 1 ? "none of them" : "no such tensor");
}

// ---- the tensors: each target tensor from ours

static int param_index(const char *name) {
    for (int p = 0; p < NUM_PARAM_TENSORS; p++)
        if (!strcmp(param_specs[p].name, name)) return p;
    return -1;
}

// The rows of part p that target tensor t takes: [*first, *first + *count).
static void part_rows(const GPTConfig *cfg, const TargetTensor *t, int p, long *first,
                      long *count) {
    long rows, cols;
    param_shape(cfg, p, &rows, &cols);
    *first = t->rows == ROWS_SECOND_HALF ? rows / 2 : 0;
    *count = t->rows == ROWS_ALL ? rows : rows / 2;
}

// rows (n, width) reordered within each block of hs rows (a head's):
// interleaved pairs to halves (ORDER_HALVES).
static void rows_to_halves(float *rows, long n, long width, int hs) {
    float *head = xmalloc(sizeof(float) * (size_t)(hs * width));
    size_t row_bytes = sizeof(float) * (size_t)width;
    for (long start = 0; start < n; start += hs) {
        memcpy(head, rows + start * width, row_bytes * (size_t)hs);
        for (int i = 0; i < hs / 2; i++) {
            memcpy(rows + (start + i) * width, head + (2 * i) * width, row_bytes);
            memcpy(rows + (start + hs / 2 + i) * width, head + (2 * i + 1) * width, row_bytes);
        }
    }
    free(head);
}

// Target tensor t of block l (l unused when its parts are not per block).
static Exported make_tensor(const GPT *model, const Format *f, const TargetTensor *t, int l) {
    const GPTConfig *cfg = &model->config;
    Exported e = {0};
    int parts[3], n = 0;
    long first[3], taken[3], rows, cols = 0;
    for (; n < 3 && t->parts[n]; n++) {
        parts[n] = param_index(t->parts[n]);
        if (parts[n] < 0)
            die("bin/export: '%s' is not a tensor of model/gpt.h's table", t->parts[n]);
        param_shape(cfg, parts[n], &rows, &cols);
        part_rows(cfg, t, parts[n], &first[n], &taken[n]);
        e.rows += taken[n];
    }
    if (e.rows == 0) return e;
    memcpy(e.parts, parts, sizeof parts);
    memcpy(e.part_rows, taken, sizeof taken);
    e.num_parts = n;
    e.layer = param_specs[parts[0]].stacked ? l : -1;
    e.cols = cols;
    e.is_matrix = cols > 0;
    if (param_specs[parts[0]].stacked) {
        int used = snprintf(e.name, sizeof e.name, f->block_prefix, l);
        snprintf(e.name + used, sizeof e.name - (size_t)used, "%s", t->name);
    } else {
        snprintf(e.name, sizeof e.name, "%s", t->name);
    }
    long width = cols ? cols : 1;
    if (n == 1 && t->order == ORDER_AS_IS) {
        e.data = param_slice(model, &model->params, parts[0], l) + first[0] * width;
        return e;
    }
    // the parts' rows stacked, then reordered
    float *stacked = xmalloc(sizeof(float) * (size_t)(e.rows * width));
    long row = 0;
    for (int i = 0; i < n; i++) {
        memcpy(stacked + row * width,
               param_slice(model, &model->params, parts[i], l) + first[i] * width,
               sizeof(float) * (size_t)(taken[i] * width));
        row += taken[i];
    }
    if (t->order == ORDER_HALVES) rows_to_halves(stacked, e.rows, width, cfg->dim / cfg->heads);
    if (t->order == ORDER_TRANSPOSED) {
        float *transposed = xmalloc(sizeof(float) * (size_t)(e.rows * width));
        for (long r = 0; r < e.rows; r++)
            for (long c = 0; c < cols; c++) transposed[c * e.rows + r] = stacked[r * cols + c];
        free(stacked);
        stacked = transposed;
        e.cols = e.rows;
        e.rows = cols;
    }
    e.owned = stacked;
    e.data = stacked;
    return e;
}

static int is_absent(const Format *f, int p) {
    for (int i = 0; i < 4 && f->absent[i]; i++)
        if (!strcmp(f->absent[i], param_specs[p].name)) return 1;
    return 0;
}

// Every row of each of our tensors must be in exactly one target tensor,
// but for a tensor the format lacks, which must then be zero; dies naming
// the first that is not so.
static void check_coverage(const char *path, const GPT *model, const Format *f,
                           const long taken[NUM_PARAM_TENSORS]) {
    for (int p = 0; p < NUM_PARAM_TENSORS; p++) {
        long rows, cols;
        param_shape(&model->config, p, &rows, &cols);
        if (taken[p] == rows) continue;
        const char *block = param_specs[p].stacked ? "h.0." : "";
        if (taken[p] > rows)
            die("%s: tensor '%s%s' has more than one place in %s", path, block, param_specs[p].name,
                f->title);
        if (!is_absent(f, p))
            die("%s: tensor '%s%s' has no counterpart in %s", path, block, param_specs[p].name,
                f->title);
        const float *values = param_tensor(&model->params, p);
        size_t size = model->param_sizes[p];
        for (size_t i = 0; i < size; i++)
            if (values[i] != 0.0f) {
                char name[96];
                if (param_specs[p].stacked)
                    snprintf(name, sizeof name, "h.%zu.%s", i / (size / (size_t)model->config.layers),
                             param_specs[p].name);
                else snprintf(name, sizeof name, "%s", param_specs[p].name);
                die("%s: %s cannot be exported to %s: %s %s, and %s is not zero", path, f->chosen_by,
                    target_names[f->target], f->title, f->absent_why, name);
            }
    }
}

// Every target tensor of the model, non-block ones first, then block 0's,
// 1's, ...; a tensor the config does not use (0 rows) is not there. Returns
// the count.
int make_tensors(const char *path, const GPT *model, const Format *f, Exported **out) {
    int L = model->config.layers, capacity = f->count * (L + 1), n = 0;
    Exported *tensors = xcalloc((size_t)capacity, sizeof(Exported));
    long taken[NUM_PARAM_TENSORS] = {0};
    for (int pass = 0; pass < 2; pass++)
        for (int l = 0; l < (pass ? L : 1); l++)
            for (int i = 0; i < f->count; i++) {
                const TargetTensor *t = &f->tensors[i];
                int p = param_index(t->parts[0]);
                if (p >= 0 && param_specs[p].stacked != pass) continue;
                Exported e = make_tensor(model, f, t, l);
                if (e.rows == 0) continue;
                tensors[n++] = e;
                if (pass == 1 && l > 0) continue;
                for (int k = 0; k < 3 && t->parts[k]; k++) {
                    long first, count;
                    part_rows(&model->config, t, param_index(t->parts[k]), &first, &count);
                    taken[param_index(t->parts[k])] += count;
                }
            }
    check_coverage(path, model, f, taken);
    *out = tensors;
    return n;
}

void free_tensors(Exported *tensors, int n) {
    for (int i = 0; i < n; i++) free(tensors[i].owned);
    free(tensors);
}
