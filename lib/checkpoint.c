// checkpoint.c: a GPT and its vocabulary as one safetensors file, with
// PyTorch's names and nn.Linear's [out, in] layout. Our buffers already hold
// every weight matrix as (out, in) row-major, so each tensor is a slice of
// params_memory written as is.
#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/safetensors.h"
#include "../base/util.h"

// ---- the tensors of a checkpoint, in file order

// One named tensor: a view into the parameters (data NULL when only the
// names and shapes are wanted, before the model exists).
typedef struct {
    char name[64];
    float *data;
    int ndim;
    long shape[2];
} CheckpointTensor;

// The 16 tensors of a block. Shapes are in units of C: {4, 1} is [4C, C],
// {1, 0} is [C].
typedef struct {
    const char *suffix;
    size_t field; // offsetof the stacked (L, ...) view in ParameterTensors
    int dims_in_c[2];
} BlockTensor;

static const BlockTensor BLOCK_TENSORS[] = {
    {"ln_1.weight", offsetof(ParameterTensors, ln1_w), {1, 0}},
    {"ln_1.bias", offsetof(ParameterTensors, ln1_b), {1, 0}},
    {"attn.w_q.weight", offsetof(ParameterTensors, w_q), {1, 1}},
    {"attn.w_q.bias", offsetof(ParameterTensors, b_q), {1, 0}},
    {"attn.w_k.weight", offsetof(ParameterTensors, w_k), {1, 1}},
    {"attn.w_k.bias", offsetof(ParameterTensors, b_k), {1, 0}},
    {"attn.w_v.weight", offsetof(ParameterTensors, w_v), {1, 1}},
    {"attn.w_v.bias", offsetof(ParameterTensors, b_v), {1, 0}},
    {"attn.w_o.weight", offsetof(ParameterTensors, w_o), {1, 1}},
    {"attn.w_o.bias", offsetof(ParameterTensors, b_o), {1, 0}},
    {"ln_2.weight", offsetof(ParameterTensors, ln2_w), {1, 0}},
    {"ln_2.bias", offsetof(ParameterTensors, ln2_b), {1, 0}},
    {"mlp.fc.weight", offsetof(ParameterTensors, fc_w), {4, 1}},  // nn.Linear(C, 4C)
    {"mlp.fc.bias", offsetof(ParameterTensors, fc_b), {4, 0}},
    {"mlp.proj.weight", offsetof(ParameterTensors, proj_w), {1, 4}}, // nn.Linear(4C, C)
    {"mlp.proj.bias", offsetof(ParameterTensors, proj_b), {1, 0}},
};
#define TENSORS_PER_BLOCK ((long)(sizeof BLOCK_TENSORS / sizeof BLOCK_TENSORS[0]))

// wte, wpe, the blocks, ln_f.weight and ln_f.bias.
static long num_checkpoint_tensors(const GPTConfig *cfg) {
    return 4 + TENSORS_PER_BLOCK * cfg->layers;
}

static void set_tensor(CheckpointTensor *t, const char *name, float *data, int ndim, long d0,
                       long d1) {
    snprintf(t->name, sizeof t->name, "%s", name);
    t->data = data;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
}

// Tensor i (0 <= i < num_checkpoint_tensors) in file order. Computed one at
// a time so that a config read from a file is never used to size an
// allocation before the file has shown it holds those tensors.
static void checkpoint_tensor(const GPTConfig *cfg, const ParameterTensors *params, long i,
                              CheckpointTensor *t) {
    long V = cfg->vocab_size, T = cfg->context, C = cfg->dim, L = cfg->layers;
    if (i == 0) {
        set_tensor(t, "wte", params ? params->wte : NULL, 2, V, C);
    } else if (i == 1) {
        set_tensor(t, "wpe", params ? params->wpe : NULL, 2, T, C);
    } else if (i == 2 + TENSORS_PER_BLOCK * L) {
        set_tensor(t, "ln_f.weight", params ? params->lnf_w : NULL, 1, C, 0);
    } else if (i == 3 + TENSORS_PER_BLOCK * L) {
        set_tensor(t, "ln_f.bias", params ? params->lnf_b : NULL, 1, C, 0);
    } else {
        long layer = (i - 2) / TENSORS_PER_BLOCK;
        const BlockTensor *kind = &BLOCK_TENSORS[(i - 2) % TENSORS_PER_BLOCK];
        long d0 = kind->dims_in_c[0] * C, d1 = kind->dims_in_c[1] * C;
        long per_layer = d1 ? d0 * d1 : d0;
        float *data = NULL;
        if (params) {
            float *stacked = *(float *const *)((const char *)params + kind->field);
            data = stacked + layer * per_layer;
        }
        char name[64];
        snprintf(name, sizeof name, "h.%ld.%s", layer, kind->suffix);
        set_tensor(t, name, data, d1 ? 2 : 1, d0, d1);
    }
}

static size_t tensor_floats(const CheckpointTensor *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

// ---- saving

// {"layers":L,"heads":H,"dim":C,"context":T,"vocab_size":V}
static char *config_json(const GPTConfig *cfg) {
    cJSON *object = cJSON_CreateObject();
    if (!object) die("out of memory building the checkpoint config");
    const struct {
        const char *key;
        int value;
    } fields[] = {{"layers", cfg->layers},   {"heads", cfg->heads},
                  {"dim", cfg->dim},         {"context", cfg->context},
                  {"vocab_size", cfg->vocab_size}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!cJSON_AddNumberToObject(object, fields[i].key, fields[i].value))
            die("out of memory building the checkpoint config");
    char *text = cJSON_PrintUnformatted(object);
    cJSON_Delete(object);
    if (!text) die("out of memory printing the checkpoint config");
    return text;
}

// ["\n", " ", "!", ...]: one UTF-8 string per id. Returns NULL with a
// message for U+0000, which a C string (and so cJSON) cannot hold.
static char *vocab_json(const char *path, const Vocab *vocab, char *err, size_t err_len) {
    cJSON *array = cJSON_CreateArray();
    if (!array) die("out of memory building the checkpoint vocab");
    for (int id = 0; id < vocab->size; id++) {
        if (vocab->code_points[id] == 0) {
            set_error(err, err_len, "%s: vocab id %d is U+0000, which the checkpoint cannot store",
                      path, id);
            cJSON_Delete(array);
            return NULL;
        }
        char utf8[5];
        int bytes = utf8_encode(vocab->code_points[id], utf8);
        utf8[bytes] = '\0';
        if (!cJSON_AddItemToArray(array, cJSON_CreateString(utf8)))
            die("out of memory building the checkpoint vocab");
    }
    char *text = cJSON_PrintUnformatted(array);
    cJSON_Delete(array);
    if (!text) die("out of memory printing the checkpoint vocab");
    return text;
}

int gpt_save(const char *path, const GPT *model, const Vocab *vocab, char *err, size_t err_len) {
    const GPTConfig *cfg = &model->config;
    if (vocab->size != cfg->vocab_size) {
        set_error(err, err_len, "%s: vocab has %d characters, the model's vocab_size is %d", path,
                  vocab->size, cfg->vocab_size);
        return 0;
    }
    char *vocab_text = vocab_json(path, vocab, err, err_len);
    if (!vocab_text) return 0;
    char *config_text = config_json(cfg);

    long count = num_checkpoint_tensors(cfg);
    CheckpointTensor *views = xmalloc(sizeof(CheckpointTensor) * (size_t)count);
    StTensor *tensors = xmalloc(sizeof(StTensor) * (size_t)count);
    size_t covered = 0;
    for (long i = 0; i < count; i++) {
        checkpoint_tensor(cfg, &model->params, i, &views[i]);
        tensors[i] = (StTensor){.name = views[i].name, .data = views[i].data,
                                .ndim = views[i].ndim};
        tensors[i].shape[0] = views[i].shape[0];
        tensors[i].shape[1] = views[i].shape[1];
        covered += tensor_floats(&views[i]);
    }
    int ok = 0;
    if (covered != model->num_params) {
        // The table above and param_sizes disagree: a bug, not a user error.
        set_error(err, err_len, "%s: checkpoint tensors cover %zu floats, the model has %zu", path,
                  covered, model->num_params);
    } else {
        StMeta meta[] = {{"format_version", CHECKPOINT_FORMAT_VERSION},
                         {"config", config_text},
                         {"vocab", vocab_text}};
        ok = safetensors_write(path, tensors, (int)count, meta, 3, err, err_len);
    }
    free(tensors);
    free(views);
    free(config_text);
    free(vocab_text);
    return ok;
}

// ---- loading

// The config metadata: five positive integers, then gpt_config_valid.
static int parse_config(const char *path, const char *text, GPTConfig *cfg, char *err,
                        size_t err_len) {
    if (!text) {
        set_error(err, err_len, "%s: no 'config' in the metadata", path);
        return 0;
    }
    cJSON *object = cJSON_Parse(text);
    if (!cJSON_IsObject(object)) {
        set_error(err, err_len, "%s: config is not a JSON object: '%.200s'", path, text);
        cJSON_Delete(object);
        return 0;
    }
    struct {
        const char *key;
        int *value;
    } fields[] = {{"layers", &cfg->layers},   {"heads", &cfg->heads},
                  {"dim", &cfg->dim},         {"context", &cfg->context},
                  {"vocab_size", &cfg->vocab_size}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, fields[i].key);
        double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
        if (!(v >= 1 && v <= INT_MAX && v == floor(v))) {
            char *found = item ? cJSON_PrintUnformatted(item) : NULL;
            set_error(err, err_len, "%s: config '%s' is %.40s, expected a positive integer", path,
                      fields[i].key, found ? found : "missing");
            free(found);
            cJSON_Delete(object);
            return 0;
        }
        *fields[i].value = (int)v;
    }
    cJSON_Delete(object);
    char reason[256];
    if (!gpt_config_valid(cfg, reason, sizeof reason)) {
        set_error(err, err_len, "%s: config: %s", path, reason);
        return 0;
    }
    return 1;
}

// The vocab metadata: vocab_size one-character strings, code points in id order.
static int parse_vocab(const char *path, const char *text, int vocab_size, Vocab *vocab,
                       char *err, size_t err_len) {
    if (!text) {
        set_error(err, err_len, "%s: no 'vocab' in the metadata", path);
        return 0;
    }
    cJSON *array = cJSON_Parse(text);
    if (!cJSON_IsArray(array)) {
        set_error(err, err_len, "%s: vocab is not a JSON array of strings", path);
        cJSON_Delete(array);
        return 0;
    }
    int n = cJSON_GetArraySize(array);
    if (n != vocab_size) {
        set_error(err, err_len, "%s: vocab has %d characters, config vocab_size is %d", path, n,
                  vocab_size);
        cJSON_Delete(array);
        return 0;
    }
    uint32_t *code_points = xmalloc(sizeof(uint32_t) * (size_t)(n + 1));
    int id = 0;
    for (const cJSON *item = array->child; item; item = item->next, id++) {
        const unsigned char *s = cJSON_IsString(item) ? (const unsigned char *)item->valuestring
                                                      : NULL;
        size_t len = s ? strlen((const char *)s) : 0, pos = 0;
        if (!s || !utf8_decode(s, len, &pos, &code_points[id]) || pos != len) {
            char *found = cJSON_PrintUnformatted(item);
            set_error(err, err_len, "%s: vocab[%d] is %.40s, expected a one-character string",
                      path, id, found ? found : "?");
            free(found);
            free(code_points);
            cJSON_Delete(array);
            return 0;
        }
    }
    cJSON_Delete(array);
    char reason[256];
    int ok = vocab_from_code_points(vocab, code_points, n, reason, sizeof reason);
    free(code_points);
    if (!ok) set_error(err, err_len, "%s: vocab: %s", path, reason);
    return ok;
}

static int load_checkpoint(const char *path, GPT *model, Vocab *vocab, char *err,
                           size_t err_len) {
    StFile *file = safetensors_open(path, err, err_len);
    if (!file) return 0;
    const char *version = safetensors_meta(file, "format_version");
    if (!version) {
        set_error(err, err_len,
                  "%s: no format_version in the metadata (not a checkpoint of this program?)",
                  path);
        safetensors_close(file);
        return 0;
    }
    if (strcmp(version, CHECKPOINT_FORMAT_VERSION) != 0) {
        set_error(err, err_len, "%s: format_version '%.40s', this program reads '%s'", path,
                  version, CHECKPOINT_FORMAT_VERSION);
        safetensors_close(file);
        return 0;
    }
    GPTConfig cfg;
    Vocab loaded_vocab = {0};
    if (!parse_config(path, safetensors_meta(file, "config"), &cfg, err, err_len) ||
        !parse_vocab(path, safetensors_meta(file, "vocab"), cfg.vocab_size, &loaded_vocab, err,
                     err_len)) {
        safetensors_close(file);
        return 0;
    }

    // Every tensor present with its shape before allocating: the file then
    // holds all the floats the config asks for, so a corrupt config cannot
    // request more memory than the file's size.
    long count = num_checkpoint_tensors(&cfg);
    CheckpointTensor t;
    for (long i = 0; i < count; i++) {
        checkpoint_tensor(&cfg, NULL, i, &t);
        if (!safetensors_check_f32(file, t.name, t.ndim, t.shape, err, err_len)) {
            vocab_free(&loaded_vocab);
            safetensors_close(file);
            return 0;
        }
    }

    GPT loaded;
    gpt_build(&loaded, &cfg);
    size_t covered = 0;
    int ok = 1;
    for (long i = 0; i < count && ok; i++) {
        checkpoint_tensor(&cfg, &loaded.params, i, &t);
        ok = safetensors_read_f32(file, t.name, t.ndim, t.shape, t.data, err, err_len);
        covered += tensor_floats(&t);
    }
    if (ok && covered != loaded.num_params) {
        set_error(err, err_len, "%s: checkpoint tensors cover %zu floats, the model has %zu", path,
                  covered, loaded.num_params);
        ok = 0;
    }
    safetensors_close(file);
    if (!ok) {
        gpt_free(&loaded);
        vocab_free(&loaded_vocab);
        return 0;
    }
    // The caller's model and vocab are only written on success.
    *model = loaded;
    *vocab = loaded_vocab;
    return 1;
}

int gpt_load(const char *path, GPT *model, Vocab *vocab, char *err, size_t err_len) {
    int ok = load_checkpoint(path, model, vocab, err, err_len);
    if (!ok && err && err_len) safetensors_printable(err); // it quotes the file's config
    return ok;
}
