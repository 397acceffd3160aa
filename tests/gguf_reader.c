// gguf_reader.c: reading GGUF (gguf_reader.h). The whole file is taken into
// memory, and every count, length and offset is checked against the bytes
// that are really there before it is believed.
#include "gguf_reader.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/safetensors.h"
#include "../base/util.h"

// ---- reading

struct GgufFile {
    char *path;                // for error messages
    unsigned char *bytes;      // the whole file
    size_t size;
    int version;
    uint32_t alignment;
    GgufValue *values;
    int num_values;
    GgufString *strings;       // every string value and array item, in file order
    GgufTensorInfo *tensors;
    int num_tensors;
    char *arena;               // each string's text, NUL-terminated: keys, values, names
    size_t arena_used;
    const unsigned char *data; // the data section, inside bytes
    size_t data_size;
};

// The parse's position, and its first error.
typedef struct {
    GgufFile *file;
    size_t pos;
    char *err;
    size_t err_len;
} Cursor;

static size_t left(const Cursor *c) { return c->file->size - c->pos; }

static int truncated(Cursor *c, const char *what, uint64_t need) {
    set_error(c->err, c->err_len, "%s: truncated: %s needs %llu bytes at offset %zu, the file has %zu",
              c->file->path, what, (unsigned long long)need, c->pos, left(c));
    return 0;
}

static int read_bytes(Cursor *c, void *out, size_t n, const char *what) {
    if (left(c) < n) return truncated(c, what, n);
    memcpy(out, c->file->bytes + c->pos, n);
    c->pos += n;
    return 1;
}

static int read_u32(Cursor *c, uint32_t *v, const char *what) { return read_bytes(c, v, 4, what); }
static int read_u64(Cursor *c, uint64_t *v, const char *what) { return read_bytes(c, v, 8, what); }

// A string into the arena (NUL-terminated). The arena holds every string's
// bytes plus one NUL each: at most the file's size plus one byte for every
// 8 (a string takes at least its 8-byte length), sized so in gguf_open.
static int read_string(Cursor *c, GgufString *s, const char *what) {
    uint64_t len;
    if (!read_u64(c, &len, what)) return 0;
    if (len > left(c)) return truncated(c, what, len);
    char *text = c->file->arena + c->file->arena_used;
    memcpy(text, c->file->bytes + c->pos, (size_t)len);
    text[len] = '\0';
    c->file->arena_used += (size_t)len + 1;
    c->pos += (size_t)len;
    s->text = text;
    s->len = len;
    return 1;
}

// Strings in the arena hold no NUL of their own where a name is wanted.
static int plain_name(Cursor *c, const GgufString *s, const char *what) {
    if (strlen(s->text) != s->len) {
        set_error(c->err, c->err_len, "%s: %s '%s' holds a NUL byte", c->file->path, what, s->text);
        return 0;
    }
    return 1;
}

static int read_value(Cursor *c, GgufValue *v, size_t *next_string) {
    GgufFile *f = c->file;
    uint32_t type;
    if (!read_u32(c, &type, "a metadata value type")) return 0;
    if (type >= GGUF_TYPE_COUNT) {
        set_error(c->err, c->err_len, "%s: metadata '%s' has value type %u, known: 0 to %d",
                  f->path, v->key, type, GGUF_TYPE_COUNT - 1);
        return 0;
    }
    v->type = (GgufType)type;
    v->count = 1;
    GgufType item = v->type;
    if (v->type == GGUF_TYPE_ARRAY) {
        if (!read_u32(c, &type, "an array's item type") ||
            !read_u64(c, &v->count, "an array's length"))
            return 0;
        if (type >= GGUF_TYPE_COUNT || type == GGUF_TYPE_ARRAY) {
            set_error(c->err, c->err_len,
                      "%s: metadata '%s' is an array of type %u (arrays of arrays are not read)",
                      f->path, v->key, type);
            return 0;
        }
        v->item_type = item = (GgufType)type;
    }
    if (item == GGUF_TYPE_STRING) {
        // each string takes at least its 8-byte length: the count fits in the file
        if (v->count > left(c) / 8) return truncated(c, "a string array", v->count * 8);
        v->strings = f->strings + *next_string;
        for (uint64_t k = 0; k < v->count; k++)
            if (!read_string(c, &f->strings[(*next_string)++], "a string value")) return 0;
        return 1;
    }
    size_t size = gguf_value_type_size(item);
    if (v->count > left(c) / size) return truncated(c, "a metadata value", v->count * size);
    v->raw = f->bytes + c->pos;
    if (item == GGUF_TYPE_BOOL)
        for (uint64_t k = 0; k < v->count; k++)
            if (v->raw[k] > 1) {
                set_error(c->err, c->err_len, "%s: metadata '%s': bool byte %u, expected 0 or 1",
                          f->path, v->key, v->raw[k]);
                return 0;
            }
    c->pos += (size_t)(v->count * size);
    return 1;
}

static int compare_tensor_offset(const void *a, const void *b) {
    const GgufTensorInfo *x = *(const GgufTensorInfo *const *)a, *y = *(const GgufTensorInfo *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int compare_tensor_name(const void *a, const void *b) {
    return strcmp((*(const GgufTensorInfo *const *)a)->name, (*(const GgufTensorInfo *const *)b)->name);
}

static int compare_value_key(const void *a, const void *b) {
    return strcmp((*(const GgufValue *const *)a)->key, (*(const GgufValue *const *)b)->key);
}

// Sorted copies find duplicates and overlaps in n log n, so a header of a
// million entries is no slower to refuse than to read.
static int check_unique_keys(Cursor *c) {
    GgufFile *f = c->file;
    const GgufValue **sorted = xmalloc(sizeof *sorted * (size_t)(f->num_values + 1));
    for (int i = 0; i < f->num_values; i++) sorted[i] = &f->values[i];
    qsort(sorted, (size_t)f->num_values, sizeof *sorted, compare_value_key);
    int ok = 1;
    for (int i = 1; i < f->num_values && ok; i++)
        if (!strcmp(sorted[i - 1]->key, sorted[i]->key)) {
            set_error(c->err, c->err_len, "%s: metadata key '%s' appears twice", f->path,
                      sorted[i]->key);
            ok = 0;
        }
    free(sorted);
    return ok;
}

static int check_tensors_placed(Cursor *c) {
    GgufFile *f = c->file;
    const GgufTensorInfo **sorted = xmalloc(sizeof *sorted * (size_t)(f->num_tensors + 1));
    for (int i = 0; i < f->num_tensors; i++) sorted[i] = &f->tensors[i];
    int ok = 1;
    qsort(sorted, (size_t)f->num_tensors, sizeof *sorted, compare_tensor_name);
    for (int i = 1; i < f->num_tensors && ok; i++)
        if (!strcmp(sorted[i - 1]->name, sorted[i]->name)) {
            set_error(c->err, c->err_len, "%s: tensor '%s' appears twice", f->path, sorted[i]->name);
            ok = 0;
        }
    qsort(sorted, (size_t)f->num_tensors, sizeof *sorted, compare_tensor_offset);
    for (int i = 1; i < f->num_tensors && ok; i++)
        if (sorted[i]->offset < sorted[i - 1]->offset + sorted[i - 1]->bytes) {
            set_error(c->err, c->err_len, "%s: tensor '%s' at data offset %llu overlaps '%s'",
                      f->path, sorted[i]->name, (unsigned long long)sorted[i]->offset,
                      sorted[i - 1]->name);
            ok = 0;
        }
    free(sorted);
    return ok;
}

static int read_tensor_info(Cursor *c, GgufTensorInfo *t) {
    GgufFile *f = c->file;
    GgufString name;
    if (!read_string(c, &name, "a tensor name") || !plain_name(c, &name, "tensor name")) return 0;
    t->name = name.text;
    if (name.len == 0) {
        set_error(c->err, c->err_len, "%s: a tensor has an empty name", f->path);
        return 0;
    }
    if (name.len >= GGUF_MAX_NAME) {
        set_error(c->err, c->err_len, "%s: tensor name '%.80s...' is %llu bytes, at most %d",
                  f->path, name.text, (unsigned long long)name.len, GGUF_MAX_NAME - 1);
        return 0;
    }
    uint32_t ndim;
    if (!read_u32(c, &ndim, "a tensor's dimension count")) return 0;
    if (ndim < 1 || ndim > GGUF_MAX_DIMS) {
        set_error(c->err, c->err_len, "%s: tensor '%s' has %u dimensions, expected 1 to %d",
                  f->path, t->name, ndim, GGUF_MAX_DIMS);
        return 0;
    }
    t->ndim = (int)ndim;
    for (int d = 0; d < t->ndim; d++)
        if (!read_u64(c, &t->ne[d], "a tensor's dimensions")) return 0;
    if (!read_u32(c, &t->type, "a tensor's type") || !read_u64(c, &t->offset, "a tensor's offset"))
        return 0;
    char type_name[16];
    size_t size = ggml_type_size(t->type);
    if (!size) {
        set_error(c->err, c->err_len,
                  "%s: tensor '%s' is %s, which this reader does not read (F32, F16, BF16, F64 "
                  "and integers only)",
                  f->path, t->name, ggml_type_name(t->type, type_name));
        return 0;
    }
    uint64_t bytes = size;
    for (int d = 0; d < t->ndim; d++) {
        // ggml holds dimensions as int64_t; a product of them must fit too
        if (t->ne[d] > (uint64_t)INT64_MAX || (t->ne[d] != 0 && bytes > UINT64_MAX / 2 / t->ne[d])) {
            set_error(c->err, c->err_len, "%s: tensor '%s': its dimensions overflow", f->path,
                      t->name);
            return 0;
        }
        bytes *= t->ne[d];
    }
    t->bytes = bytes;
    return 1;
}

static int parse(Cursor *c) {
    GgufFile *f = c->file;
    char magic[4];
    if (!read_bytes(c, magic, 4, "the magic \"GGUF\"")) return 0;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0) {
        set_error(c->err, c->err_len, "%s: not a GGUF file (its first bytes are not \"GGUF\")",
                  f->path);
        return 0;
    }
    uint32_t version;
    if (!read_u32(c, &version, "the version")) return 0;
    if (version != 2 && version != 3) {
        int swapped = (version & 0xFFFF) == 0 && version != 0;
        set_error(c->err, c->err_len, "%s: GGUF version %u, this reader reads 2 and 3%s", f->path,
                  version, swapped ? " (a big-endian file?)" : "");
        return 0;
    }
    f->version = (int)version;
    uint64_t num_tensors, num_values;
    if (!read_u64(c, &num_tensors, "the tensor count") ||
        !read_u64(c, &num_values, "the metadata count"))
        return 0;
    // a value takes at least 13 bytes (key length, type, one byte), a tensor's
    // info at least 32 (name length, dimension count, one dimension, type, offset)
    if (num_values > left(c) / 13 || num_tensors > left(c) / 32 ||
        num_values + num_tensors > left(c) / 13) {
        set_error(c->err, c->err_len,
                  "%s: %llu metadata values and %llu tensors cannot fit in the %zu bytes after "
                  "the header",
                  f->path, (unsigned long long)num_values, (unsigned long long)num_tensors, left(c));
        return 0;
    }
    f->values = xcalloc((size_t)num_values + 1, sizeof(GgufValue));
    f->tensors = xcalloc((size_t)num_tensors + 1, sizeof(GgufTensorInfo));
    f->strings = xcalloc(left(c) / 8 + 1, sizeof(GgufString));
    size_t next_string = 0;
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < num_values; i++) {
        GgufValue *v = &f->values[f->num_values];
        GgufString key;
        if (!read_string(c, &key, "a metadata key") || !plain_name(c, &key, "metadata key"))
            return 0;
        if (key.len == 0) {
            set_error(c->err, c->err_len, "%s: metadata value %llu has an empty key", f->path,
                      (unsigned long long)i);
            return 0;
        }
        v->key = key.text;
        if (!read_value(c, v, &next_string)) return 0;
        f->num_values++;
    }
    if (!check_unique_keys(c)) return 0;
    const GgufValue *alignment = gguf_get(f, "general.alignment");
    if (alignment) {
        uint32_t a = 0;
        if (alignment->type == GGUF_TYPE_UINT32) memcpy(&a, alignment->raw, 4);
        if (alignment->type != GGUF_TYPE_UINT32 || a == 0 || (a & (a - 1)) != 0) {
            set_error(c->err, c->err_len, "%s: general.alignment is not a uint32 power of two",
                      f->path);
            return 0;
        }
        f->alignment = a;
    }
    for (uint64_t i = 0; i < num_tensors; i++) {
        if (!read_tensor_info(c, &f->tensors[f->num_tensors])) return 0;
        f->num_tensors++;
    }
    uint64_t data_start = gguf_align_up(c->pos, f->alignment);
    if (data_start > f->size) {
        set_error(c->err, c->err_len, "%s: truncated: the data section starts at byte %llu, the file has %zu",
                  f->path, (unsigned long long)data_start, f->size);
        return 0;
    }
    f->data = f->bytes + data_start;
    f->data_size = f->size - (size_t)data_start;
    for (int i = 0; i < f->num_tensors; i++) {
        const GgufTensorInfo *t = &f->tensors[i];
        if (t->offset % f->alignment != 0) {
            set_error(c->err, c->err_len, "%s: tensor '%s': data offset %llu is not a multiple of the alignment %u",
                      f->path, t->name, (unsigned long long)t->offset, f->alignment);
            return 0;
        }
        if (t->offset > f->data_size || t->bytes > f->data_size - t->offset) {
            set_error(c->err, c->err_len,
                      "%s: truncated: tensor '%s' needs data bytes %llu to %llu, the file has %zu",
                      f->path, t->name, (unsigned long long)t->offset,
                      (unsigned long long)(t->offset + t->bytes), f->data_size);
            return 0;
        }
    }
    return check_tensors_placed(c);
}

GgufFile *gguf_open(const char *path, char *err, size_t err_len) {
    size_t size;
    unsigned char *bytes = read_regular_file(path, &size, err, err_len);
    if (!bytes) return NULL;
    GgufFile *f = xcalloc(1, sizeof *f);
    f->path = xmalloc(strlen(path) + 1);
    strcpy(f->path, path);
    f->bytes = bytes;
    f->size = size;
    f->arena = xmalloc(f->size + f->size / 8 + 1);
    Cursor c = {f, 0, err, err_len};
    if (!parse(&c)) {
        if (err && err_len) safetensors_printable(err); // it quotes the file's keys and names
        gguf_close(f);
        return NULL;
    }
    return f;
}

void gguf_close(GgufFile *file) {
    if (!file) return;
    free(file->values);
    free(file->tensors);
    free(file->strings);
    free(file->arena);
    free(file->bytes);
    free(file->path);
    free(file);
}

int gguf_version(const GgufFile *file) { return file->version; }
uint32_t gguf_alignment(const GgufFile *file) { return file->alignment; }
int gguf_num_values(const GgufFile *file) { return file->num_values; }
const GgufValue *gguf_value_at(const GgufFile *file, int i) {
    return i >= 0 && i < file->num_values ? &file->values[i] : NULL;
}

const GgufValue *gguf_get(const GgufFile *file, const char *key) {
    for (int i = 0; i < file->num_values; i++)
        if (!strcmp(file->values[i].key, key)) return &file->values[i];
    return NULL;
}

// Item i of a numeric value, or 0 when it is not one (or i is past its end).
static int numeric_item(const GgufValue *v, uint64_t i, GgufType *type, const unsigned char **at) {
    *type = v->type == GGUF_TYPE_ARRAY ? v->item_type : v->type;
    size_t size = gguf_value_type_size(*type);
    if (!size || i >= v->count) return 0;
    *at = v->raw + i * size;
    return 1;
}

int gguf_value_int(const GgufValue *value, uint64_t i, int64_t *out) {
    GgufType type;
    const unsigned char *at;
    if (!numeric_item(value, i, &type, &at)) return 0;
    switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: *out = at[0]; return 1;
    case GGUF_TYPE_INT8: *out = (int8_t)at[0]; return 1;
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, at, 2); *out = v; return 1; }
    case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, at, 2); *out = v; return 1; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, at, 4); *out = v; return 1; }
    case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, at, 4); *out = v; return 1; }
    case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, at, 8); *out = v; return 1; }
    case GGUF_TYPE_UINT64: {
        uint64_t v;
        memcpy(&v, at, 8);
        if (v > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v;
        return 1;
    }
    default: return 0;
    }
}

int gguf_value_uint(const GgufValue *value, uint64_t i, uint64_t *out) {
    GgufType type;
    const unsigned char *at;
    if (!numeric_item(value, i, &type, &at)) return 0;
    if (type == GGUF_TYPE_UINT64) {
        memcpy(out, at, 8);
        return 1;
    }
    int64_t v;
    if (!gguf_value_int(value, i, &v) || v < 0) return 0;
    *out = (uint64_t)v;
    return 1;
}

int gguf_value_float(const GgufValue *value, uint64_t i, double *out) {
    GgufType type;
    const unsigned char *at;
    if (!numeric_item(value, i, &type, &at)) return 0;
    if (type == GGUF_TYPE_FLOAT32) {
        float v;
        memcpy(&v, at, 4);
        *out = v;
        return 1;
    }
    if (type == GGUF_TYPE_FLOAT64) {
        memcpy(out, at, 8);
        return 1;
    }
    int64_t v;
    uint64_t u;
    if (gguf_value_int(value, i, &v)) *out = (double)v;
    else if (gguf_value_uint(value, i, &u)) *out = (double)u;
    else return 0;
    return 1;
}

int gguf_num_tensors(const GgufFile *file) { return file->num_tensors; }
const GgufTensorInfo *gguf_tensor_at(const GgufFile *file, int i) {
    return i >= 0 && i < file->num_tensors ? &file->tensors[i] : NULL;
}

const GgufTensorInfo *gguf_find_tensor(const GgufFile *file, const char *name) {
    for (int i = 0; i < file->num_tensors; i++)
        if (!strcmp(file->tensors[i].name, name)) return &file->tensors[i];
    return NULL;
}

const unsigned char *gguf_tensor_data(const GgufFile *file, const GgufTensorInfo *info) {
    return file->data + info->offset;
}

// "[4, 8]" (row-major, outermost first) into buf.
static void format_shape(char *buf, size_t len, int ndim, const uint64_t *rows_first) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, d ? ", %llu" : "%llu",
                                 (unsigned long long)rows_first[d]);
    if (used < len) snprintf(buf + used, len - used, "]");
}

int gguf_read_f32(const GgufFile *file, const char *name, int ndim, const long *shape,
                  float *dst, char *err, size_t err_len) {
    const GgufTensorInfo *t = gguf_find_tensor(file, name);
    if (!t) {
        set_error(err, err_len, "%s: no tensor '%s'", file->path, name);
        return 0;
    }
    char type_name[16];
    if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16) {
        set_error(err, err_len, "%s: tensor '%s' is %s, expected F32, F16 or BF16", file->path,
                  name, ggml_type_name(t->type, type_name));
        return 0;
    }
    int same = t->ndim == ndim;
    for (int d = 0; d < ndim && same; d++)
        same = shape[d] >= 0 && t->ne[ndim - 1 - d] == (uint64_t)shape[d];
    if (!same) {
        uint64_t found[GGUF_MAX_DIMS], expected[GGUF_MAX_DIMS];
        int expected_ndim = ndim < 0 ? 0 : ndim > GGUF_MAX_DIMS ? GGUF_MAX_DIMS : ndim;
        for (int d = 0; d < t->ndim; d++) found[d] = t->ne[t->ndim - 1 - d];
        for (int d = 0; d < expected_ndim; d++) expected[d] = (uint64_t)shape[d];
        char found_text[120], expected_text[120];
        format_shape(found_text, sizeof found_text, t->ndim, found);
        format_shape(expected_text, sizeof expected_text, expected_ndim, expected);
        set_error(err, err_len, "%s: tensor '%s' has shape %s, expected %s", file->path, name,
                  found_text, expected_text);
        return 0;
    }
    const unsigned char *data = gguf_tensor_data(file, t);
    uint64_t n = t->bytes / ggml_type_size(t->type);
    if (t->type == GGML_TYPE_F32) {
        memcpy(dst, data, (size_t)t->bytes);
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, data + 2 * i, 2);
        dst[i] = t->type == GGML_TYPE_F16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
    }
    return 1;
}
