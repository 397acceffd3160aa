// export.c: bin/export, a checkpoint in another program's format: a GGUF
// file that llama.cpp runs as its gpt2 architecture (--to gguf), or a
// folder in Hugging Face's GPT-2 layout, what transformers'
// GPT2LMHeadModel loads (--to hf). docs/export.md says how to run each.
//
// Our block is GPT-2's (LayerNorm with biases, learned positions, GELU,
// biases on every product, the head tied to wte), so each target tensor is
// one of ours, or W_Q, W_K, W_V stacked into the fused QKV that both
// targets keep; Hugging Face's Conv1D holds its products transposed.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

// What a target holds, as an error names it.
static const char *const target_architecture[] = {"gguf's gpt2 architecture",
                                                  "Hugging Face's gpt2 (GPT2LMHeadModel)"};

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
         "gguf: one file for llama.cpp; hf: a folder in Hugging Face's GPT-2 layout", 0, -1, 0},
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
    "  --to gguf: one GGUF file (version 3) that llama.cpp runs as its gpt2\n"
    "    architecture, the vocabulary as its RWKV tokenizer (one token per\n"
    "    character, no merges, nothing added); greedy text as bin/sample's:\n"
    "      llama-completion -m model.gguf -no-cnv -c 64 --temp 0 -p 'ROMEO:'\n"
    "  --to hf: a folder with config.json, model.safetensors and tokenizer.json,\n"
    "    what transformers' GPT2LMHeadModel.from_pretrained loads.\n"
    "A model of a block neither target has (RMSNorm, RoPE, ...) is refused.\n"
    "docs/export.md: both layouts, and how to run them.";

static ExportOptions default_options(void) {
    return (ExportOptions){.ckpt = "out/model.safetensors", .dtype = "f32"};
}

static ExportOptions parse_options(int argc, char **argv) {
    ExportOptions o = default_options();
    Option table[NUM_OPTIONS];
    option_table(&o, table);
    char err[2048];
    int parsed = options_parse(table, NUM_OPTIONS, argc, argv, err, sizeof err);
    if (parsed == OPTIONS_HELP) {
        ExportOptions defaults = default_options();
        Option help_table[NUM_OPTIONS];
        option_table(&defaults, help_table);
        options_usage(stdout, USAGE, help_table, NUM_OPTIONS);
        exit(0);
    }
    if (!parsed) usage_error("%s", err);
    if (!o.to) usage_error("--to is needed: gguf or hf");
    if (!o.out) usage_error("--out is needed: the .gguf file, or the folder for hf");
    return o;
}

// ---- the architecture, chosen from the checkpoint's config in one place
//
// GPT-2's block is what both targets hold today: llama.cpp's gpt2 and
// transformers' GPT2LMHeadModel. The config keys of another block (the
// modern one's "norm", "pos", "rope_base", "mlp", "qk_norm", "untie",
// "softcap") are refused by their bin/train flag unless their value is
// GPT-2's choice; so is any key this exporter does not know. (RMSNorm with
// RoPE and no norm biases is llama.cpp's llama architecture: the place to
// choose it is here, once the checkpoint can hold such a model.)
typedef enum { ARCH_GPT2 } Architecture;

static const char *const SHAPE_KEYS[] = {"layers", "heads", "dim", "context", "vocab_size"};

// 1 when config key `key` with value `item` describes GPT-2's block.
static int is_gpt2_choice(const char *key, const cJSON *item) {
    static const struct {
        const char *key, *value;
    } strings[] = {{"norm", "layernorm"}, {"pos", "learned"}, {"mlp", "gelu"}};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        if (!strcmp(key, strings[i].key))
            return cJSON_IsString(item) && !strcmp(item->valuestring, strings[i].value);
    if (!strcmp(key, "qk_norm") || !strcmp(key, "untie")) return cJSON_IsFalse(item);
    if (!strcmp(key, "softcap")) return cJSON_IsNull(item) || (cJSON_IsNumber(item) && item->valuedouble == 0);
    if (!strcmp(key, "rope_base")) return 1; // used only with --pos rope, which is refused itself
    return 0;
}

static int is_block_key(const char *key) {
    static const char *const keys[] = {"norm", "pos", "rope_base", "mlp", "qk_norm", "untie", "softcap"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(key, keys[i])) return 1;
    return 0;
}

// "--pos rope", "--qk-norm", "--softcap 30": the bin/train flag a config key came from.
static void flag_of(const char *key, const cJSON *item, char *out, size_t len) {
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", key);
    for (char *c = flag; *c; c++)
        if (*c == '_') *c = '-';
    if (cJSON_IsTrue(item)) snprintf(out, len, "%s", flag);
    else if (cJSON_IsString(item)) snprintf(out, len, "%s %.40s", flag, item->valuestring);
    else if (cJSON_IsNumber(item)) snprintf(out, len, "%s %g", flag, item->valuedouble);
    else {
        char *text = cJSON_PrintUnformatted(item);
        snprintf(out, len, "%s %.40s", flag, text ? text : "?");
        free(text);
    }
}

// The architecture of the checkpoint at path in `target`, from its config
// metadata read here (so that every key is seen); dies with one line naming
// the first option the target cannot hold.
static Architecture choose_architecture(const char *path, Target target) {
    char err[1024];
    StFile *file = safetensors_open(path, err, sizeof err);
    if (!file) die("%s", err);
    const char *text = safetensors_meta(file, "config");
    if (!safetensors_meta(file, "format_version") || !text)
        die("%s: no format_version or config in its metadata: not a checkpoint of bin/train", path);
    cJSON *config = cJSON_Parse(text);
    if (!cJSON_IsObject(config)) die("%s: its config is not a JSON object", path);
    for (const cJSON *item = config->child; item; item = item->next) {
        int shape = 0;
        for (size_t i = 0; i < sizeof SHAPE_KEYS / sizeof SHAPE_KEYS[0]; i++)
            shape |= !strcmp(item->string, SHAPE_KEYS[i]);
        if (shape || (is_block_key(item->string) && is_gpt2_choice(item->string, item))) continue;
        char flag[128];
        flag_of(item->string, item, flag, sizeof flag);
        if (is_block_key(item->string))
            die("%s: %s cannot be exported to %s", path, flag, target_architecture[target]);
        char key[64];
        snprintf(key, sizeof key, "%s", item->string);
        safetensors_printable(key);
        die("%s: config key '%s' is not one bin/export knows, so it cannot be exported to %s",
            path, key, target_architecture[target]);
    }
    cJSON_Delete(config);
    safetensors_close(file);
    return ARCH_GPT2;
}

// ---- the tensors: each target tensor from ours
//
// A target tensor is one of our tensors, or several stacked along their
// rows (the fused QKV: rows Q, K, V), named by our checkpoint names
// (model/gpt.h's table, without "h.{l}." for the per-block ones, which the
// target has once per block under its block prefix). Hugging Face's GPT-2
// keeps its products as Conv1D, y = x W + b with W [in, out]: ours
// transposed.
typedef struct {
    const char *name;
    const char *parts[3];
    int conv1d;
} TargetTensor;

// llama.cpp's gpt2 (src/models/gpt2.cpp): no "output.weight", so its head
// is token_embd, as ours is wte.
static const TargetTensor GGUF_GPT2[] = {
    {"token_embd.weight", {"wte"}, 0},
    {"position_embd.weight", {"wpe"}, 0},
    {"attn_norm.weight", {"ln_1.weight"}, 0},
    {"attn_norm.bias", {"ln_1.bias"}, 0},
    {"attn_qkv.weight", {"attn.w_q.weight", "attn.w_k.weight", "attn.w_v.weight"}, 0},
    {"attn_qkv.bias", {"attn.w_q.bias", "attn.w_k.bias", "attn.w_v.bias"}, 0},
    {"attn_output.weight", {"attn.w_o.weight"}, 0},
    {"attn_output.bias", {"attn.w_o.bias"}, 0},
    {"ffn_norm.weight", {"ln_2.weight"}, 0},
    {"ffn_norm.bias", {"ln_2.bias"}, 0},
    {"ffn_up.weight", {"mlp.fc.weight"}, 0},
    {"ffn_up.bias", {"mlp.fc.bias"}, 0},
    {"ffn_down.weight", {"mlp.proj.weight"}, 0},
    {"ffn_down.bias", {"mlp.proj.bias"}, 0},
    {"output_norm.weight", {"ln_f.weight"}, 0},
    {"output_norm.bias", {"ln_f.bias"}, 0},
};

// transformers' GPT2LMHeadModel as save_pretrained writes it: its GPT2Model
// under "transformer.", lm_head.weight left out (tied to wte).
static const TargetTensor HF_GPT2[] = {
    {"wte.weight", {"wte"}, 0},
    {"wpe.weight", {"wpe"}, 0},
    {"ln_1.weight", {"ln_1.weight"}, 0},
    {"ln_1.bias", {"ln_1.bias"}, 0},
    {"attn.c_attn.weight", {"attn.w_q.weight", "attn.w_k.weight", "attn.w_v.weight"}, 1},
    {"attn.c_attn.bias", {"attn.w_q.bias", "attn.w_k.bias", "attn.w_v.bias"}, 0},
    {"attn.c_proj.weight", {"attn.w_o.weight"}, 1},
    {"attn.c_proj.bias", {"attn.w_o.bias"}, 0},
    {"ln_2.weight", {"ln_2.weight"}, 0},
    {"ln_2.bias", {"ln_2.bias"}, 0},
    {"mlp.c_fc.weight", {"mlp.fc.weight"}, 1},
    {"mlp.c_fc.bias", {"mlp.fc.bias"}, 0},
    {"mlp.c_proj.weight", {"mlp.proj.weight"}, 1},
    {"mlp.c_proj.bias", {"mlp.proj.bias"}, 0},
    {"ln_f.weight", {"ln_f.weight"}, 0},
    {"ln_f.bias", {"ln_f.bias"}, 0},
};

typedef struct {
    const TargetTensor *tensors;
    int count;
    const char *prefix, *block_prefix; // before a name, and before a block's ("%d": the block)
} TensorMap;

static const TensorMap TENSOR_MAPS[] = {
    [TARGET_GGUF] = {GGUF_GPT2, (int)(sizeof GGUF_GPT2 / sizeof GGUF_GPT2[0]), "", "blk.%d."},
    [TARGET_HF] = {HF_GPT2, (int)(sizeof HF_GPT2 / sizeof HF_GPT2[0]), "transformer.",
                   "transformer.h.%d."},
};

// One target tensor, made: row-major fp32 data (a view into the model, or
// `owned`) and its shape, rows x cols (cols 0 for a vector).
typedef struct {
    char name[GGUF_MAX_NAME];
    const float *data;
    float *owned;
    long rows, cols;
    int is_matrix;
} Exported;

static int param_index(const char *name) {
    for (int p = 0; p < NUM_PARAM_TENSORS; p++)
        if (!strcmp(param_specs[p].name, name)) return p;
    return -1;
}

// Target tensor t of block l (l unused when its parts are not per block).
static Exported make_tensor(const GPT *model, const TensorMap *map, const TargetTensor *t, int l) {
    Exported e = {0};
    int parts[3], n = 0;
    long part_rows[3], cols = 0;
    for (; n < 3 && t->parts[n]; n++) {
        parts[n] = param_index(t->parts[n]);
        if (parts[n] < 0) die("bin/export: '%s' is not a tensor of model/gpt.h's table", t->parts[n]);
        param_shape(&model->config, parts[n], &part_rows[n], &cols);
        e.rows += part_rows[n];
    }
    e.cols = cols;
    e.is_matrix = cols > 0;
    if (param_specs[parts[0]].stacked) {
        int used = snprintf(e.name, sizeof e.name, map->block_prefix, l);
        snprintf(e.name + used, sizeof e.name - (size_t)used, "%s", t->name);
    } else {
        snprintf(e.name, sizeof e.name, "%s%s", map->prefix, t->name);
    }
    long width = cols ? cols : 1;
    if (n == 1 && !t->conv1d) {
        e.data = param_slice(model, &model->params, parts[0], l);
        return e;
    }
    // the parts stacked along their rows, then (Conv1D) transposed
    float *stacked = xmalloc(sizeof(float) * (size_t)(e.rows * width));
    long row = 0;
    for (int i = 0; i < n; i++) {
        memcpy(stacked + row * width, param_slice(model, &model->params, parts[i], l),
               sizeof(float) * (size_t)(part_rows[i] * width));
        row += part_rows[i];
    }
    if (t->conv1d) {
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

// Every target tensor of the model, non-block ones first, then block 0's,
// 1's, ...; every one of our tensors used exactly once (a tensor of ours
// the map does not place is refused, naming it). Returns the count.
static int make_tensors(const char *path, const GPT *model, Target target, Exported **out) {
    const TensorMap *map = &TENSOR_MAPS[target];
    int L = model->config.layers, capacity = map->count * L + map->count, n = 0;
    Exported *tensors = xcalloc((size_t)capacity, sizeof(Exported));
    int uses[NUM_PARAM_TENSORS] = {0};
    for (int pass = 0; pass < 2; pass++)
        for (int l = 0; l < (pass ? L : 1); l++)
            for (int i = 0; i < map->count; i++) {
                const TargetTensor *t = &map->tensors[i];
                int p = param_index(t->parts[0]);
                if (p >= 0 && param_specs[p].stacked != pass) continue;
                tensors[n++] = make_tensor(model, map, t, l);
                if (pass == 0 || l == 0)
                    for (int k = 0; k < 3 && t->parts[k]; k++) uses[param_index(t->parts[k])]++;
            }
    for (int p = 0; p < NUM_PARAM_TENSORS; p++)
        if (uses[p] != 1)
            die("%s: tensor '%s%s' has %s in %s", path, param_specs[p].stacked ? "h.0." : "",
                param_specs[p].name, uses[p] ? "more than one place" : "no counterpart",
                target_architecture[target]);
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

static void write_gguf(const ExportOptions *o, const GPT *model, const Vocab *vocab,
                       GgmlType dtype) {
    const GPTConfig *cfg = &model->config;
    int V = vocab->size;
    char **tokens = xmalloc(sizeof(char *) * (size_t)V);
    int32_t *token_types = xmalloc(sizeof(int32_t) * (size_t)V);
    for (int id = 0; id < V; id++) {
        tokens[id] = rwkv_token_text(vocab->code_points[id]);
        token_types[id] = 1; // normal
    }
    // general.file_type: llama.cpp's llama_ftype (ALL_F32, MOSTLY_F16, MOSTLY_BF16)
    uint32_t file_type = dtype == GGML_TYPE_F32 ? 0 : dtype == GGML_TYPE_F16 ? 1 : 32;
    GgufMeta meta[] = {
        gguf_meta_string("general.architecture", "gpt2"),
        gguf_meta_string("general.name", "tinygpt-c"),
        gguf_meta_u32("general.file_type", file_type),
        gguf_meta_u32("general.alignment", GGUF_DEFAULT_ALIGNMENT),
        gguf_meta_u32("gpt2.context_length", (uint32_t)cfg->context),
        gguf_meta_u32("gpt2.embedding_length", (uint32_t)cfg->dim),
        gguf_meta_u32("gpt2.block_count", (uint32_t)cfg->layers),
        gguf_meta_u32("gpt2.feed_forward_length", (uint32_t)(4 * cfg->dim)),
        gguf_meta_u32("gpt2.attention.head_count", (uint32_t)cfg->heads),
        gguf_meta_f32("gpt2.attention.layer_norm_epsilon", 1e-5f), // model/ops.c's LayerNorm
        gguf_meta_string("tokenizer.ggml.model", "rwkv"),
        gguf_meta_strings("tokenizer.ggml.tokens", (const char *const *)tokens, (uint64_t)V),
        gguf_meta_i32s("tokenizer.ggml.token_type", token_types, (uint64_t)V),
        gguf_meta_bool("tokenizer.ggml.add_bos_token", 0),
        gguf_meta_bool("tokenizer.ggml.add_eos_token", 0),
    };
    Exported *exported;
    int n = make_tensors(o->ckpt, model, TARGET_GGUF, &exported);
    GgufTensor *tensors = xcalloc((size_t)n, sizeof(GgufTensor));
    for (int i = 0; i < n; i++) {
        const Exported *e = &exported[i];
        // vectors (norms, biases) stay F32, as llama.cpp's own converter keeps them
        tensors[i] = (GgufTensor){.name = e->name, .data = e->data, .ndim = e->is_matrix ? 2 : 1,
                                  .type = e->is_matrix ? dtype : GGML_TYPE_F32};
        tensors[i].shape[0] = e->rows;
        tensors[i].shape[1] = e->cols;
    }
    char err[1024];
    int ok = gguf_write(o->out, meta, (int)(sizeof meta / sizeof meta[0]), tensors, n, err,
                        sizeof err);
    free(tensors);
    free_tensors(exported, n);
    for (int id = 0; id < V; id++) free(tokens[id]);
    free(tokens);
    free(token_types);
    if (!ok) die("%s", err);
}

// ---- --to hf

// config.json: GPT2Config's keys (transformers' configuration_gpt2), our
// shape, GELU in its tanh form ("gelu_new"), no dropout, no BOS or EOS.
static char *hf_config_json(const GPTConfig *cfg) {
    cJSON *c = cJSON_CreateObject();
    cJSON *architectures = cJSON_AddArrayToObject(c, "architectures");
    if (!c || !architectures) die("out of memory building config.json");
    cJSON_AddItemToArray(architectures, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(c, "model_type", "gpt2");
    const struct {
        const char *key;
        double value;
    } numbers[] = {{"vocab_size", cfg->vocab_size}, {"n_positions", cfg->context},
                   {"n_embd", cfg->dim},            {"n_layer", cfg->layers},
                   {"n_head", cfg->heads},          {"n_inner", 4.0 * cfg->dim},
                   {"layer_norm_epsilon", 1e-5},    {"resid_pdrop", 0},
                   {"embd_pdrop", 0},               {"attn_pdrop", 0},
                   {"initializer_range", 0.02}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        if (!cJSON_AddNumberToObject(c, numbers[i].key, numbers[i].value))
            die("out of memory building config.json");
    cJSON_AddStringToObject(c, "activation_function", "gelu_new");
    cJSON_AddBoolToObject(c, "scale_attn_weights", 1);
    cJSON_AddBoolToObject(c, "scale_attn_by_inverse_layer_idx", 0);
    cJSON_AddBoolToObject(c, "reorder_and_upcast_attn", 0);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", 1);
    cJSON_AddNullToObject(c, "bos_token_id");
    cJSON_AddNullToObject(c, "eos_token_id");
    cJSON_AddStringToObject(c, "torch_dtype", "float32");
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

static void write_text(const char *dir, const char *name, const char *text) {
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!write_file_atomic(path, text, strlen(text), err, sizeof err)) die("%s", err);
}

static void write_hf(const ExportOptions *o, const GPT *model, const Vocab *vocab) {
    Exported *exported;
    int n = make_tensors(o->ckpt, model, TARGET_HF, &exported);
    StTensor *tensors = xcalloc((size_t)n, sizeof(StTensor));
    for (int i = 0; i < n; i++) {
        const Exported *e = &exported[i];
        tensors[i] = (StTensor){.name = e->name, .data = e->data, .ndim = e->is_matrix ? 2 : 1};
        tensors[i].shape[0] = e->rows;
        tensors[i].shape[1] = e->cols;
    }
    ensure_dir(o->out);
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", o->out);
    StMeta meta[] = {{"format", "pt"}}; // what save_pretrained writes
    int ok = safetensors_write(path, tensors, n, meta, 1, err, sizeof err);
    free(tensors);
    free_tensors(exported, n);
    if (!ok) die("%s", err);
    char *config = hf_config_json(&model->config), *tokenizer = hf_tokenizer_json(vocab);
    write_text(o->out, "config.json", config);
    write_text(o->out, "tokenizer.json", tokenizer);
    write_text(o->out, "tokenizer_config.json",
               "{\n\t\"tokenizer_class\": \"PreTrainedTokenizerFast\",\n"
               "\t\"model_max_length\": 1000000000\n}\n");
    free(config);
    free(tokenizer);
}

// ---- main

// Refuse, before anything is read, an output that is there without
// --force, or of the wrong kind (a folder for a file, a file for a folder).
static void check_output(const ExportOptions *o, Target target) {
    struct stat st;
    if (stat(o->out, &st) != 0) return;
    int is_dir = S_ISDIR(st.st_mode);
    if (target == TARGET_GGUF && is_dir) die("%s: is a folder; --to gguf writes a file", o->out);
    if (target == TARGET_HF && !is_dir) die("%s: is a file; --to hf writes a folder", o->out);
    if (!o->force) die("%s: exists (--force overwrites it)", o->out);
}

int main(int argc, char **argv) {
    ExportOptions o = parse_options(argc, argv);
    Target target = (Target)option_choice("--to", o.to, target_names, 2);
    int dtype = option_choice("--dtype", o.dtype, dtype_names, 3);
    if (target == TARGET_HF && dtype != 0)
        usage_error("--dtype %s: --to hf writes f32 (model.safetensors as our checkpoints)", o.dtype);
    check_output(&o, target);
    // ARCH_GPT2, the only one today: the tensor maps above are its
    (void)choose_architecture(o.ckpt, target);
    GPT model;
    Vocab vocab;
    char err[2048];
    if (!gpt_load(o.ckpt, &model, &vocab, err, sizeof err)) die("%s", err);
    size_t non_finite = 0;
    for (size_t i = 0; i < model.num_params; i++) non_finite += !isfinite(model.params_memory[i]);
    if (non_finite)
        fprintf(stderr, "warning: %s has %zu non-finite (NaN or Inf) weights; exported as they are\n",
                o.ckpt, non_finite);
    if (target == TARGET_GGUF) write_gguf(&o, &model, &vocab, dtype_types[dtype]);
    else write_hf(&o, &model, &vocab);
    const GPTConfig *c = &model.config;
    printf("%s: %s, %d layers, %d heads, %d wide, context %d, %d characters, %s\n", o.out,
           target == TARGET_GGUF ? "GGUF, llama.cpp's gpt2 with the RWKV tokenizer"
                                 : "Hugging Face's GPT2LMHeadModel with tokenizer.json",
           c->layers, c->heads, c->dim, c->context, c->vocab_size, o.dtype);
    gpt_free(&model);
    vocab_free(&vocab);
    return 0;
}
