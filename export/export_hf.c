// export_hf.c: --to hf, a folder in Hugging Face's layout: model.safetensors,
// config.json and tokenizer.json, written whole or not at all.

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/files.h"
#include "../base/safetensors.h"
#include "../base/util.h"
#include "export.h"

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

int is_hf_file(const char *name) {
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
void remove_hf_folder(const char *dir) {
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
void write_hf(const ExportOptions *o, const GPT *model, const Vocab *vocab,
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

