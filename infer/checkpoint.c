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

#include "../base/options.h"
#include "../base/safetensors.h"
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

// File order follows model/gpt.h's table: the tensors before the first
// stacked one (wte, wpe), then block 0's stacked tensors, block 1's, ...,
// then the rest (ln_f). The table keeps its stacked rows together.
static void stacked_run(int *first, int *count) {
    *first = -1;
    *count = 0;
    for (int p = 0; p < NUM_PARAM_TENSORS; p++)
        if (param_specs[p].stacked) {
            if (*first < 0) *first = p;
            (*count)++;
        }
}

static long num_checkpoint_tensors(const GPTConfig *cfg) {
    int first, stacked;
    stacked_run(&first, &stacked);
    return NUM_PARAM_TENSORS - stacked + (long)stacked * cfg->layers;
}

// Tensor i (0 <= i < num_checkpoint_tensors) in file order, a view into
// params (data NULL when params is NULL, before the model exists).
// Computed one at a time so that a config read from a file is never used to
// size an allocation before the file has shown it holds those tensors.
static void checkpoint_tensor(const GPTConfig *cfg, const ParameterTensors *params, long i,
                              CheckpointTensor *t) {
    int first, stacked;
    stacked_run(&first, &stacked);
    long blocks_end = first + (long)stacked * cfg->layers;
    int p;
    long layer = -1;
    if (i < first) {
        p = (int)i;
    } else if (i < blocks_end) {
        layer = (i - first) / stacked;
        p = first + (int)((i - first) % stacked);
    } else {
        p = (int)(i - blocks_end) + first + stacked;
    }
    long rows, cols;
    param_shape(cfg, p, &rows, &cols);
    long slice = cols ? rows * cols : rows;
    if (layer < 0)
        snprintf(t->name, sizeof t->name, "%s", param_specs[p].name);
    else
        snprintf(t->name, sizeof t->name, "h.%ld.%s", layer, param_specs[p].name);
    t->data = params ? param_tensor(params, p) + (layer < 0 ? 0 : layer * slice) : NULL;
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
}

static size_t tensor_floats(const CheckpointTensor *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

// ---- saving

// The block's choices in a checkpoint's config, by their names (gpt.h); a
// key is written only when it differs from GPT-2's (the first name), so a
// GPT-2 block's config is what it always was.

// {"layers":L,"heads":H,"dim":C,"context":T,"vocab_size":V}, and the
// block's choices (GPT_BLOCK_CHOICES) that are not GPT-2's, in the rows'
// order: a name, true, or a number
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
    int ok = 1;
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) {
        const BlockChoice *c = &gpt_block_choices[i];
        float value = gpt_choice_get(cfg, i);
        if (value == 0 || !gpt_choice_in_use(cfg, i)) continue; // GPT-2's
        char name[64];
        if (c->kind == CHOICE_NAMED)
            ok &= cJSON_AddStringToObject(object, c->key,
                                          choice_name(c->names, (int)value, name, sizeof name)) != NULL;
        else if (c->kind == CHOICE_FLAG)
            ok &= cJSON_AddBoolToObject(object, c->key, 1) != NULL;
        else
            ok &= cJSON_AddNumberToObject(object, c->key, value) != NULL;
    }
    if (!ok) die("out of memory building the checkpoint config");
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
    int saved = 0; // the tensors the config uses: not those of no rows
    for (long i = 0; i < count; i++) {
        checkpoint_tensor(cfg, &model->params, i, &views[i]);
        if (tensor_floats(&views[i]) == 0) continue;
        tensors[saved] = (StTensor){.name = views[i].name, .data = views[i].data,
                                    .ndim = views[i].ndim};
        tensors[saved].shape[0] = views[i].shape[0];
        tensors[saved].shape[1] = views[i].shape[1];
        covered += tensor_floats(&views[i]);
        saved++;
    }
    int ok = 0;
    if (covered != model->num_params) {
        // The file order above and param_sizes disagree: a bug, not a user error.
        set_error(err, err_len, "%s: checkpoint tensors cover %zu floats, the model has %zu", path,
                  covered, model->num_params);
    } else {
        StMeta meta[] = {{"format_version", CHECKPOINT_FORMAT_VERSION},
                         {"config", config_text},
                         {"vocab", vocab_text},
                         {"vocab_order", "appended"}};
        // "vocab_order" only for a fine-tuned model's vocabulary, whose
        // appended characters follow the sorted ones
        int sorted = 1;
        for (int id = 1; id < vocab->size && sorted; id++)
            sorted = vocab->code_points[id] > vocab->code_points[id - 1];
        ok = safetensors_write(path, tensors, saved, meta, sorted ? 3 : 4, err, err_len);
    }
    free(tensors);
    free(views);
    free(config_text);
    free(vocab_text);
    return ok;
}

// ---- loading

// The index of the string item among names (joined by '|'), or -1 with a
// message naming the key and what it may be.
static int name_index(const char *path, const char *key, const cJSON *item, const char *names,
                      char *err, size_t err_len) {
    int index = cJSON_IsString(item) ? choice_in(names, item->valuestring) : -1;
    if (index >= 0) return index;
    char *found = cJSON_PrintUnformatted(item), expected[128];
    choice_list(names, "\"", expected, sizeof expected);
    set_error(err, err_len, "%s: config '%s' is %.40s, expected %s", path, key,
              found ? found : "?", expected);
    free(found);
    return -1;
}

// The block's choices (config_json), each absent for GPT-2's: a checkpoint
// written before they existed loads as the block it was.
static int parse_block(const char *path, const cJSON *object, GPTConfig *cfg, char *err,
                       size_t err_len) {
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) {
        const BlockChoice *c = &gpt_block_choices[i];
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, c->key);
        float value = 0; // absent: GPT-2's
        if (item && c->kind == CHOICE_NAMED) {
            int index = name_index(path, c->key, item, c->names, err, err_len);
            if (index < 0) return 0;
            value = (float)index;
        } else if (item && c->kind == CHOICE_FLAG) {
            if (!cJSON_IsBool(item)) {
                set_error(err, err_len, "%s: config '%s' is not true or false", path, c->key);
                return 0;
            }
            value = cJSON_IsTrue(item);
        } else if (item) {
            if (!cJSON_IsNumber(item)) {
                set_error(err, err_len, "%s: config '%s' is not a number", path, c->key);
                return 0;
            }
            value = (float)item->valuedouble;
        }
        gpt_choice_set(cfg, i, value);
    }
    gpt_block_clear_unused(cfg); // a choice the block does not use, named anyway: ignored
    return 1;
}

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
    int ok = parse_block(path, object, cfg, err, err_len);
    cJSON_Delete(object);
    if (!ok) return 0;
    char reason[256];
    if (!gpt_config_valid(cfg, reason, sizeof reason)) {
        set_error(err, err_len, "%s: config: %s", path, reason);
        return 0;
    }
    return 1;
}

// The vocab metadata: vocab_size one-character strings, code points in id order,
// strictly increasing unless "vocab_order" is "appended" (then only distinct).
static int parse_vocab(const char *path, const char *text, int vocab_size, int appended,
                       Vocab *vocab, char *err, size_t err_len) {
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
    int ok = appended ? vocab_from_ids(vocab, code_points, n, reason, sizeof reason)
                      : vocab_from_code_points(vocab, code_points, n, reason, sizeof reason);
    free(code_points);
    if (!ok) set_error(err, err_len, "%s: vocab: %s", path, reason);
    return ok;
}

static int appended_vocab(const char *vocab_order) {
    return vocab_order && !strcmp(vocab_order, "appended");
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
        !parse_vocab(path, safetensors_meta(file, "vocab"), cfg.vocab_size,
                     appended_vocab(safetensors_meta(file, "vocab_order")), &loaded_vocab, err,
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
        if (tensor_floats(&t) == 0) continue; // a tensor this block does not use
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
        if (tensor_floats(&t) == 0) continue;
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
