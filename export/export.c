// export.c: bin/export, a checkpoint in another program's format: a GGUF
// file that llama.cpp runs (--to gguf), or a folder in Hugging Face's
// layout, what transformers loads (--to hf). docs/export.md says how to run
// each.
//
// A target holds a model in one of its architectures, each a block: GPT-2's
// (LayerNorm, learned positions, GELU) is llama.cpp's gpt2 and transformers'
// GPT2LMHeadModel; RMSNorm, RoPE and SwiGLU are llama.cpp's llama and
// transformers' LlamaForCausalLM, and with per-head query and key norms
// llama.cpp's qwen3. The checkpoint's config chooses one (choose_format);
// an option none of them expresses is refused by its bin/train flag, in one
// line, before anything is written. Each target tensor is one of ours, or
// several stacked along their rows (GPT-2's fused QKV), or half of one
// (SwiGLU's gate and up), its rows reordered where the target rotates other
// pairs of channels than ours, or transposed (GPT-2's Conv1D).
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/files.h"
#include "../base/gguf.h"
#include "../base/options.h"
#include "../base/safetensors.h"
#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../model/gpt.h"

// ---- the targets

typedef enum { TARGET_GGUF, TARGET_HF } Target;
static const char *const target_names[] = {"gguf", "hf"};
static const char *const dtype_names[] = {"f32", "f16", "bf16"};
static const GgmlType dtype_types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};

// ---- options

typedef struct {
    const char *ckpt, *to, *out, *dtype;
    int force;
} ExportOptions;

#define NUM_OPTIONS 5

static void option_table(ExportOptions *o, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--ckpt", "FILE", OPT_STRING, &o->ckpt, "model checkpoint (.safetensors) from bin/train", 0, -1, 0},
        {"--to", "gguf|hf", OPT_STRING, &o->to,
         "gguf: one file for llama.cpp; hf: a folder in Hugging Face's layout", 0, -1, 0},
        {"--out", "PATH", OPT_STRING, &o->out, "the .gguf file, or the folder for hf", 0, -1, 0},
        {"--dtype", "f32|f16|bf16", OPT_STRING, &o->dtype,
         "gguf: the matrices' and embeddings' type (vectors stay f32); hf: f32 only", 0, -1, 0},
        {"--force", NULL, OPT_FLAG, &o->force, "overwrite what is at --out", 0, -1, 0},
    };
    memcpy(t, table, sizeof table);
}

static const char USAGE[] =
    "usage: bin/export --ckpt out/model.safetensors --to gguf|hf --out PATH [options]\n\n"
    "Writes a trained model in another program's format:\n"
    "  --to gguf: one GGUF file (version 3) that llama.cpp runs, the vocabulary\n"
    "    as its RWKV tokenizer (one token per character, no merges, nothing\n"
    "    added); greedy text as bin/sample's:\n"
    "      llama-completion -m model.gguf -no-cnv -c 64 --temp 0 -p 'ROMEO:'\n"
    "  --to hf: a folder with config.json, model.safetensors and tokenizer.json,\n"
    "    what transformers' AutoModelForCausalLM.from_pretrained loads.\n"
    "GPT-2's block is llama.cpp's and transformers' gpt2; --norm rmsnorm --pos rope\n"
    "--mlp swiglu is their llama, with --qk-norm llama.cpp's qwen3 (gguf only).\n"
    "A block neither target has (--mlp relu2, --softcap, ...) is refused.\n"
    "docs/export.md: the layouts, and how to run them.";

static ExportOptions default_options(void) {
    return (ExportOptions){.ckpt = "out/model.safetensors", .dtype = "f32"};
}

static ExportOptions parse_options(int argc, char **argv) {
    ExportOptions o = default_options(), defaults = default_options();
    Option table[NUM_OPTIONS], help_table[NUM_OPTIONS];
    option_table(&o, table);
    option_table(&defaults, help_table);
    options_parse_or_exit(table, help_table, NUM_OPTIONS, USAGE, NULL, 0, argc, argv);
    if (!o.to) usage_error("--to is needed: gguf or hf");
    if (!o.out) usage_error("--out is needed: the .gguf file, or the folder for hf");
    return o;
}

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
static const Format *choose_format(const char *path, const GPTConfig *cfg, Target target) {
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
static void check_config_keys(const char *path, Target target) {
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
static void warn_unused_tensors(const char *path, const GPTConfig *cfg) {
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
static int make_tensors(const char *path, const GPT *model, const Format *f, Exported **out) {
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

static void free_tensors(Exported *tensors, int n) {
    for (int i = 0; i < n; i++) free(tensors[i].owned);
    free(tensors);
}
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

static void write_gguf(const ExportOptions *o, const GPT *model, const Vocab *vocab,
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

// ---- --to hf

// config.json's values, added to c in order (numbers, strings, booleans).
typedef struct {
    const char *key;
    enum { JSON_NUMBER, JSON_STRING, JSON_BOOL, JSON_NULL } type;
    double number;
    const char *string;
} JsonValue;

static void add_values(cJSON *c, const JsonValue *values, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const JsonValue *v = &values[i];
        cJSON *item = v->type == JSON_NUMBER   ? cJSON_AddNumberToObject(c, v->key, v->number)
                      : v->type == JSON_STRING ? cJSON_AddStringToObject(c, v->key, v->string)
                      : v->type == JSON_BOOL   ? cJSON_AddBoolToObject(c, v->key, v->number != 0)
                                               : cJSON_AddNullToObject(c, v->key);
        if (!item) die("out of memory building config.json");
    }
}

#define NUMBER(key, value) {key, JSON_NUMBER, value, NULL}
#define STRING(key, value) {key, JSON_STRING, 0, value}
#define BOOL(key, value) {key, JSON_BOOL, value, NULL}
#define NONE(key) {key, JSON_NULL, 0, NULL}

// config.json: the format's config class's keys (transformers'
// configuration_gpt2, configuration_llama) for our shape and block, no
// dropout, no BOS or EOS.
static char *hf_config_json(const Format *f, const GPTConfig *cfg) {
    cJSON *c = cJSON_CreateObject();
    cJSON *architectures = cJSON_AddArrayToObject(c, "architectures");
    if (!c || !architectures) die("out of memory building config.json");
    int untied = cfg->untie != 0;
    if (f->arch == ARCH_GPT2) {
        cJSON_AddItemToArray(architectures, cJSON_CreateString("GPT2LMHeadModel"));
        const JsonValue values[] = {
            STRING("model_type", "gpt2"),
            NUMBER("vocab_size", cfg->vocab_size), NUMBER("n_positions", cfg->context),
            NUMBER("n_embd", cfg->dim), NUMBER("n_layer", cfg->layers), NUMBER("n_head", cfg->heads),
            NUMBER("n_inner", gpt_mlp_hidden(cfg)),
            STRING("activation_function", "gelu_new"), // GELU's tanh form, ours
            NUMBER("layer_norm_epsilon", 1e-5),
            NUMBER("resid_pdrop", 0), NUMBER("embd_pdrop", 0), NUMBER("attn_pdrop", 0),
            NUMBER("initializer_range", 0.02),
            BOOL("scale_attn_weights", 1), BOOL("scale_attn_by_inverse_layer_idx", 0),
            BOOL("reorder_and_upcast_attn", 0), BOOL("tie_word_embeddings", !untied),
            NONE("bos_token_id"), NONE("eos_token_id"), STRING("torch_dtype", "float32"),
        };
        add_values(c, values, sizeof values / sizeof values[0]);
    } else {
        cJSON_AddItemToArray(architectures, cJSON_CreateString("LlamaForCausalLM"));
        const JsonValue values[] = {
            STRING("model_type", "llama"),
            NUMBER("vocab_size", cfg->vocab_size), NUMBER("max_position_embeddings", cfg->context),
            NUMBER("hidden_size", cfg->dim), NUMBER("intermediate_size", gpt_mlp_hidden(cfg)),
            NUMBER("num_hidden_layers", cfg->layers), NUMBER("num_attention_heads", cfg->heads),
            NUMBER("num_key_value_heads", cfg->heads), NUMBER("head_dim", cfg->dim / cfg->heads),
            STRING("hidden_act", "silu"), // SwiGLU: silu(gate) * up
            NUMBER("rms_norm_eps", 1e-5), NUMBER("rope_theta", cfg->rope_base), NONE("rope_scaling"),
            BOOL("attention_bias", 1), BOOL("mlp_bias", 1), // every product of ours has a bias
            NUMBER("attention_dropout", 0), NUMBER("initializer_range", 0.02),
            NUMBER("pretraining_tp", 1), BOOL("use_cache", 1), BOOL("tie_word_embeddings", !untied),
            NONE("bos_token_id"), NONE("eos_token_id"), STRING("torch_dtype", "float32"),
        };
        add_values(c, values, sizeof values / sizeof values[0]);
    }
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    if (!text) die("out of memory printing config.json");
    return text;
}

// tokenizer.json (Hugging Face's tokenizers): a WordLevel model whose
// vocabulary is our characters by id, a pre-tokenizer that isolates every
// character, and a decoder that joins the tokens with nothing between them.
static char *hf_tokenizer_json(const Vocab *vocab) {
    cJSON *t = cJSON_CreateObject();
    if (!t) die("out of memory building tokenizer.json");
    cJSON_AddStringToObject(t, "version", "1.0");
    cJSON_AddNullToObject(t, "truncation");
    cJSON_AddNullToObject(t, "padding");
    cJSON_AddArrayToObject(t, "added_tokens");
    cJSON_AddNullToObject(t, "normalizer");
    cJSON *pre = cJSON_AddObjectToObject(t, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "Split");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(pre, "pattern"), "Regex", "[\\s\\S]");
    cJSON_AddStringToObject(pre, "behavior", "Isolated");
    cJSON_AddBoolToObject(pre, "invert", 0);
    cJSON_AddNullToObject(t, "post_processor");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "decoder"), "type", "Fuse");
    cJSON *model = cJSON_AddObjectToObject(t, "model");
    cJSON_AddStringToObject(model, "type", "WordLevel");
    cJSON *map = cJSON_AddObjectToObject(model, "vocab");
    for (int id = 0; id < vocab->size; id++) {
        char utf8[5] = {0};
        utf8[utf8_encode(vocab->code_points[id], utf8)] = '\0';
        if (!cJSON_AddNumberToObject(map, utf8, id)) die("out of memory building tokenizer.json");
    }
    // never used by our own text (every character has its id); WordLevel needs one
    cJSON_AddStringToObject(model, "unk_token", "[UNK]");
    char *text = cJSON_Print(t);
    cJSON_Delete(t);
    if (!text) die("out of memory printing tokenizer.json");
    return text;
}

// The files of a --to hf folder: a folder holding nothing else (or their
// temporaries, "name.tmp.PID") is one bin/export wrote, which --force may
// replace.
static const char *const hf_files[] = {"model.safetensors", "config.json", "tokenizer.json",
                                       "tokenizer_config.json"};
#define NUM_HF_FILES (int)(sizeof hf_files / sizeof hf_files[0])

// bin/train's record of what it wrote into its run folder (train/run_folder.h)
#define TRAIN_RECORD ".written-by-bin-train"

static int is_hf_file(const char *name) {
    for (int i = 0; i < NUM_HF_FILES; i++) {
        size_t len = strlen(hf_files[i]);
        if (!strncmp(name, hf_files[i], len) &&
            (name[len] == '\0' || !strncmp(name + len, ".tmp.", 5)))
            return 1;
    }
    return 0;
}

// The hf folder's files (hf_files, with their temporaries) removed from
// dir, then dir itself; a folder holding anything else is left as it is.
static void remove_hf_folder(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[8400];
    while ((e = readdir(d)))
        if (is_hf_file(e->d_name)) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

// The hf folder's files are written into a folder beside --out,
// "OUT.tmp.PID", which only when whole takes its place: renamed to OUT, or
// with --force exchanged with the old folder (renameat2, Linux), which is
// then removed; elsewhere the old folder is first renamed "OUT.old.PID".
// A failure, or a kill, at any point leaves the old folder (or none) at
// OUT, never a part of the new one.
static void write_hf(const ExportOptions *o, const GPT *model, const Vocab *vocab,
                     const Format *f) {
    Exported *exported;
    int n = make_tensors(o->ckpt, model, f, &exported);
    StTensor *tensors = xcalloc((size_t)n, sizeof(StTensor));
    for (int i = 0; i < n; i++) {
        const Exported *e = &exported[i];
        tensors[i] = (StTensor){.name = e->name, .data = e->data, .ndim = e->is_matrix ? 2 : 1};
        tensors[i].shape[0] = e->rows;
        tensors[i].shape[1] = e->cols;
    }
    const char *out = o->out;
    char staging[4200], path[4400], err[8800];
    snprintf(staging, sizeof staging, "%s.tmp.%ld", out, (long)getpid());
    if (mkdir(staging, 0755) != 0)
        die("%s: cannot create folder %s: %s", out, staging, strerror(errno));
    snprintf(path, sizeof path, "%s/model.safetensors", staging);
    StMeta meta[] = {{"format", "pt"}}; // what save_pretrained writes
    int ok = safetensors_write(path, tensors, n, meta, 1, err, sizeof err);
    free(tensors);
    free_tensors(exported, n);
    char *config = hf_config_json(f, &model->config), *tokenizer = hf_tokenizer_json(vocab);
    const char *texts[][2] = {
        {"config.json", config},
        {"tokenizer.json", tokenizer},
        {"tokenizer_config.json", "{\n\t\"tokenizer_class\": \"PreTrainedTokenizerFast\",\n"
                                  "\t\"model_max_length\": 1000000000\n}\n"},
    };
    for (int i = 0; i < 3 && ok; i++) {
        snprintf(path, sizeof path, "%s/%s", staging, texts[i][0]);
        ok = write_file_atomic(path, texts[i][1], strlen(texts[i][1]), err, sizeof err);
    }
    free(config);
    free(tokenizer);
    if (!ok) {
        remove_hf_folder(staging);
        die("%s", err);
    }
    struct stat st;
    if (lstat(out, &st) != 0) {
        ok = rename(staging, out) == 0;
    } else {
#ifdef RENAME_EXCHANGE
        ok = renameat2(AT_FDCWD, staging, AT_FDCWD, out, RENAME_EXCHANGE) == 0;
        if (ok) remove_hf_folder(staging); // the old folder, now here
        else if (errno == EINVAL || errno == ENOSYS) // a filesystem without the exchange
#endif
        {
            char old[4200];
            snprintf(old, sizeof old, "%s.old.%ld", out, (long)getpid());
            ok = rename(out, old) == 0 && rename(staging, out) == 0;
            if (ok) remove_hf_folder(old);
        }
    }
    if (!ok) {
        int saved = errno;
        remove_hf_folder(staging);
        die("%s: cannot rename %s into place: %s", out, staging, strerror(saved));
    }
}

// ---- stale temporaries
//
// A write killed before its rename (kill -9, a power cut) leaves its
// temporary: "OUT.tmp.PID" beside OUT (a file, or --to hf's folder), and
// where the folder exchange is missing, "OUT.old.PID". Those of processes
// that are gone are removed before a new export of the same OUT.

static int process_alive(long pid) { return kill((pid_t)pid, 0) == 0 || errno == EPERM; }

static void remove_stale_temporaries(const char *out) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? out + (slash - dir) + 1 : out;
    if (slash == dir) dir[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    size_t base_len = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name, *suffix = name + base_len;
        if (strncmp(name, base, base_len) != 0) continue;
        int is_old = !strncmp(suffix, ".old.", 5);
        if (strncmp(suffix, ".tmp.", 5) != 0 && !is_old) continue;
        char *end;
        long pid = strtol(suffix + 5, &end, 10);
        if (*end || end == suffix + 5 || pid <= 0 || pid == (long)getpid() || process_alive(pid))
            continue;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (is_old && !file_exists(out)) continue; // the only copy of the old folder
        if (S_ISREG(st.st_mode)) unlink(path);
        else if (S_ISDIR(st.st_mode)) remove_hf_folder(path);
        if (lstat(path, &st) != 0)
            fprintf(stderr, "note: removed %s, left by an export that was cut short (process %ld "
                    "is gone)\n", path, pid);
    }
    closedir(d);
}

// ---- main: what --out may replace

// What a non-regular file is, for a message.
static const char *kind_of(mode_t mode) {
    return S_ISDIR(mode)    ? "a folder"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

// The first entry of folder dir that is not one of a --to hf folder's
// files, in *first; 0 when there is none.
static int foreign_in_hf_folder(const char *dir, char *first, size_t first_len) {
    DIR *d = opendir(dir);
    if (!d) die("%s: cannot read the folder: %s", dir, strerror(errno));
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || is_hf_file(e->d_name)) continue;
        snprintf(first, first_len, "%s", e->d_name);
        found = 1;
    }
    closedir(d);
    return found;
}

// Whether the folder `dir` (st) is the checkpoint's folder or one above it.
static int holds_checkpoint(const struct stat *dir, const char *ckpt) {
    char *real = realpath(ckpt, NULL);
    if (!real) return 0;
    int held = 0;
    for (char *slash; !held && (slash = strrchr(real, '/'));) {
        slash[slash == real] = '\0'; // "/a/b" -> "/a" -> "/"
        struct stat st;
        held = stat(real, &st) == 0 && st.st_dev == dir->st_dev && st.st_ino == dir->st_ino;
        if (slash == real) break;
    }
    free(real);
    return held;
}

// Whether path names a file bin/train lists in its run folder's record.
static int written_by_train(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : path;
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    FileList record = {0};
    char err[4400];
    int listed = written_record_read(dir, TRAIN_RECORD, &record, err, sizeof err) &&
                 file_list_find(&record, name) != NULL;
    file_list_free(&record);
    return listed;
}

// Refuse, before anything is read, an output that is there without
// --force, or that --force must not replace: of another kind than the
// target writes (a folder for a file, a FIFO, a device, a symbolic link),
// the checkpoint itself or a folder holding it, a training run's folder or
// one of its files, a folder with files bin/export does not write.
static void check_output(const ExportOptions *o, Target target) {
    struct stat st, link, in;
    if (lstat(o->out, &link) != 0) return;
    if (stat(o->out, &st) != 0)
        die("%s: is a symbolic link to nothing; --out takes a %s itself", o->out,
            target == TARGET_GGUF ? "file" : "folder");
    int is_dir = S_ISDIR(st.st_mode), is_file = S_ISREG(st.st_mode);
    const char *expected = target == TARGET_GGUF ? "--to gguf writes a regular file"
                                                 : "--to hf writes a folder";
    if (target == TARGET_GGUF && is_dir) die("%s: is a folder; --to gguf writes a file", o->out);
    if (target == TARGET_HF && is_file) die("%s: is a file; --to hf writes a folder", o->out);
    if (!is_dir && !is_file)
        die("%s: is %s; %s, and replaces nothing else", o->out, kind_of(st.st_mode), expected);
    if (S_ISLNK(link.st_mode))
        die("%s: is a symbolic link; %s and would replace the link, not what it points to", o->out,
            expected);
    if (stat(o->ckpt, &in) == 0) {
        if (is_file && st.st_dev == in.st_dev && st.st_ino == in.st_ino)
            die("%s: is the checkpoint --ckpt reads (%s); export to another file", o->out, o->ckpt);
        if (is_dir && holds_checkpoint(&st, o->ckpt))
            die("%s: holds the checkpoint --ckpt reads (%s); export to another folder", o->out,
                o->ckpt);
    }
    char first[512], record[4200];
    snprintf(record, sizeof record, "%s/%s", o->out, TRAIN_RECORD);
    if (is_file && written_by_train(o->out))
        die("%s: is a file of a training run (its folder's %s lists it); export to another file",
            o->out, TRAIN_RECORD);
    if (is_dir && file_exists(record))
        die("%s: is a training run's folder (it holds %s); export to another folder", o->out,
            TRAIN_RECORD);
    if (is_dir && foreign_in_hf_folder(o->out, first, sizeof first))
        die("%s: holds %s, which bin/export does not write; --to hf replaces only a folder of its "
            "own", o->out, first);
    if (!o->force) die("%s: exists (--force overwrites it)", o->out);
}

int main(int argc, char **argv) {
    ExportOptions o = parse_options(argc, argv);
    Target target = (Target)option_choice("--to", o.to, target_names, 2);
    int dtype = option_choice("--dtype", o.dtype, dtype_names, 3);
    if (target == TARGET_HF && dtype != 0)
        usage_error("--dtype %s: --to hf writes f32 (model.safetensors as our checkpoints)", o.dtype);
    // "hf/" is the folder "hf": its temporary is "hf.tmp.PID" beside it, not in it
    char out[4096];
    snprintf(out, sizeof out, "%s", o.out);
    for (size_t len = strlen(out); len > 1 && out[len - 1] == '/'; len--) out[len - 1] = '\0';
    o.out = out;
    check_output(&o, target);
    check_config_keys(o.ckpt, target);
    GPT model;
    Vocab vocab;
    char err[2048];
    if (!gpt_load(o.ckpt, &model, &vocab, err, sizeof err)) die("%s", err);
    const Format *format = choose_format(o.ckpt, &model.config, target);
    warn_unused_tensors(o.ckpt, &model.config);
    size_t non_finite = 0;
    for (size_t i = 0; i < model.num_params; i++) non_finite += !isfinite(model.params_memory[i]);
    if (non_finite)
        fprintf(stderr, "warning: %s has %zu non-finite (NaN or Inf) weights; exported as they are\n",
                o.ckpt, non_finite);
    remove_stale_temporaries(o.out);
    if (target == TARGET_GGUF) write_gguf(&o, &model, &vocab, format, dtype_types[dtype]);
    else write_hf(&o, &model, &vocab, format);
    const GPTConfig *c = &model.config;
    printf("%s: %s, %s, %d layers, %d heads, %d wide, context %d, %d characters, %s\n", o.out,
           target == TARGET_GGUF ? "GGUF" : "Hugging Face's layout", format->title, c->layers,
           c->heads, c->dim, c->context, c->vocab_size, o.dtype);
    gpt_free(&model);
    vocab_free(&vocab);
    return 0;
}
