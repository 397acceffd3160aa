// gguf.c: writing the GGUF format (ggml's docs/gguf.md, version 3). The
// header is built in memory and written before the tensors' data. (The
// reader, which only the tests and the fuzzer need, is tests/gguf_reader.c.)
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "safetensors.h"
#include "util.h"

// Numbers and tensor data are copied as the host holds them; the format
// (as written here) is little-endian.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c assumes a little-endian host (values are copied as is)"
#endif

// ---- types

size_t gguf_value_type_size(GgufType type) {
    switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

// ggml's tensor types by number (docs/gguf.md); the gaps are types ggml
// removed. Only the unquantized ones have an element size here.
static const struct {
    const char *name;
    size_t bytes; // 0: a quantized block type, which this code does not read
} GGML_TYPES[] = {
    [0] = {"F32", 4},      [1] = {"F16", 2},      [2] = {"Q4_0", 0},     [3] = {"Q4_1", 0},
    [6] = {"Q5_0", 0},     [7] = {"Q5_1", 0},     [8] = {"Q8_0", 0},     [9] = {"Q8_1", 0},
    [10] = {"Q2_K", 0},    [11] = {"Q3_K", 0},    [12] = {"Q4_K", 0},    [13] = {"Q5_K", 0},
    [14] = {"Q6_K", 0},    [15] = {"Q8_K", 0},    [16] = {"IQ2_XXS", 0}, [17] = {"IQ2_XS", 0},
    [18] = {"IQ3_XXS", 0}, [19] = {"IQ1_S", 0},   [20] = {"IQ4_NL", 0},  [21] = {"IQ3_S", 0},
    [22] = {"IQ2_S", 0},   [23] = {"IQ4_XS", 0},  [24] = {"I8", 1},      [25] = {"I16", 2},
    [26] = {"I32", 4},     [27] = {"I64", 8},     [28] = {"F64", 8},     [29] = {"IQ1_M", 0},
    [30] = {"BF16", 2},    [34] = {"TQ1_0", 0},   [35] = {"TQ2_0", 0},   [39] = {"MXFP4", 0},
};
#define NUM_GGML_TYPES ((uint32_t)(sizeof GGML_TYPES / sizeof GGML_TYPES[0]))

const char *ggml_type_name(uint32_t type, char buf[16]) {
    if (type < NUM_GGML_TYPES && GGML_TYPES[type].name) return GGML_TYPES[type].name;
    snprintf(buf, 16, "type %u", type);
    return buf;
}

size_t ggml_type_size(uint32_t type) {
    return type < NUM_GGML_TYPES ? GGML_TYPES[type].bytes : 0;
}

// ---- conversions

uint16_t gguf_f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16) | 0x40); // quiet NaN
    bits += 0x7FFFu + ((bits >> 16) & 1); // round to nearest even
    return (uint16_t)(bits >> 16);
}

float gguf_bf16_to_f32(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
uint16_t gguf_f32_to_f16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs = bits & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) return sign | 0x7E00u;      // NaN
    if (abs >= 0x477FF000u) return sign | 0x7C00u;     // rounds past 65504: Inf
    if (abs < 0x38800000u) {                           // below 2^-14: a subnormal half
        // value = abs_float; a half subnormal is m * 2^-24
        float magnitude;
        memcpy(&magnitude, &abs, 4);
        float scaled = magnitude * 16777216.0f;         // exact: a power of two
        return sign | (uint16_t)lrintf(scaled);         // lrintf rounds to nearest even
    }
    uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1); // round the 13 dropped bits to even
    return sign | (uint16_t)((rounded - 0x38000000u) >> 13);
}

float gguf_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
    float f;
    if (exponent == 0) {
        f = ldexpf((float)mantissa, -24);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        bits |= sign;
        memcpy(&f, &bits, 4);
        return f;
    }
    uint32_t bits = exponent == 0x1F ? sign | 0x7F800000u | (mantissa << 13)
                                     : sign | ((exponent + 112) << 23) | (mantissa << 13);
    memcpy(&f, &bits, 4);
    return f;
}

// ---- writing

// A byte buffer that grows: the header is built in one before the file is opened.
typedef struct {
    unsigned char *bytes;
    size_t len, cap;
} Bytes;

static void put(Bytes *b, const void *data, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *grown = xmalloc(cap);
        if (b->len) memcpy(grown, b->bytes, b->len);
        free(b->bytes);
        b->bytes = grown;
        b->cap = cap;
    }
    memcpy(b->bytes + b->len, data, n);
    b->len += n;
}

static void put_u32(Bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(Bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_string(Bytes *b, const char *s) {
    size_t n = strlen(s);
    put_u64(b, n);
    put(b, s, n);
}

static uint64_t tensor_elements(const GgufTensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    return n;
}

// What the writer takes: a message for the first thing that is not.
static int check_writable(const char *path, const GgufMeta *meta, int num_meta,
                          const GgufTensor *tensors, int num_tensors, char *err, size_t err_len) {
    for (int i = 0; i < num_meta; i++) {
        const GgufMeta *m = &meta[i];
        if (!m->key || !m->key[0]) {
            set_error(err, err_len, "%s: metadata entry %d has no key", path, i);
            return 0;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(meta[j].key, m->key)) {
                set_error(err, err_len, "%s: metadata key '%s' given twice", path, m->key);
                return 0;
            }
        int scalar = m->type == GGUF_TYPE_UINT32 || m->type == GGUF_TYPE_INT32 ||
                     m->type == GGUF_TYPE_FLOAT32 || m->type == GGUF_TYPE_BOOL ||
                     m->type == GGUF_TYPE_UINT64 || (m->type == GGUF_TYPE_STRING && m->value.string);
        int array = m->type == GGUF_TYPE_ARRAY &&
                    (m->item_type == GGUF_TYPE_STRING || m->item_type == GGUF_TYPE_INT32 ||
                     m->item_type == GGUF_TYPE_UINT32 || m->item_type == GGUF_TYPE_FLOAT32) &&
                    (m->count == 0 || m->value.strings);
        if (!scalar && !array) {
            set_error(err, err_len, "%s: metadata '%s': a type this writer does not write, or no value",
                      path, m->key);
            return 0;
        }
        for (uint64_t k = 0; array && m->item_type == GGUF_TYPE_STRING && k < m->count; k++)
            if (!m->value.strings[k]) {
                set_error(err, err_len, "%s: metadata '%s': string %llu is NULL", path, m->key,
                          (unsigned long long)k);
                return 0;
            }
    }
    for (int i = 0; i < num_tensors; i++) {
        const GgufTensor *t = &tensors[i];
        if (!t->name || !t->name[0] || strlen(t->name) >= GGUF_MAX_NAME) {
            set_error(err, err_len, "%s: tensor %d: a name of 1 to %d bytes is needed", path, i,
                      GGUF_MAX_NAME - 1);
            return 0;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(tensors[j].name, t->name)) {
                set_error(err, err_len, "%s: tensor '%s' given twice", path, t->name);
                return 0;
            }
        if (t->ndim < 1 || t->ndim > GGUF_MAX_DIMS) {
            set_error(err, err_len, "%s: tensor '%s' has %d dimensions, expected 1 to %d", path,
                      t->name, t->ndim, GGUF_MAX_DIMS);
            return 0;
        }
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] < 1) {
                set_error(err, err_len, "%s: tensor '%s' has shape[%d] = %ld, expected >= 1", path,
                          t->name, d, t->shape[d]);
                return 0;
            }
        if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16) {
            set_error(err, err_len, "%s: tensor '%s': written as F32, F16 or BF16 only", path,
                      t->name);
            return 0;
        }
        if (!t->data) {
            set_error(err, err_len, "%s: tensor '%s' has no data", path, t->name);
            return 0;
        }
    }
    return 1;
}

static void put_meta(Bytes *b, const GgufMeta *m) {
    put_string(b, m->key);
    put_u32(b, (uint32_t)m->type);
    switch (m->type) {
    case GGUF_TYPE_UINT32: put_u32(b, m->value.u32); break;
    case GGUF_TYPE_INT32: put(b, &m->value.i32, 4); break;
    case GGUF_TYPE_FLOAT32: put(b, &m->value.f32, 4); break;
    case GGUF_TYPE_UINT64: put_u64(b, m->value.u64); break;
    case GGUF_TYPE_BOOL: {
        unsigned char v = m->value.boolean ? 1 : 0;
        put(b, &v, 1);
        break;
    }
    case GGUF_TYPE_STRING: put_string(b, m->value.string); break;
    default: // ARRAY (check_writable allows nothing else)
        put_u32(b, (uint32_t)m->item_type);
        put_u64(b, m->count);
        if (m->item_type == GGUF_TYPE_STRING)
            for (uint64_t k = 0; k < m->count; k++) put_string(b, m->value.strings[k]);
        else if (m->count)
            put(b, m->value.i32s, (size_t)m->count * 4); // INT32, UINT32, FLOAT32: 4 bytes each
        break;
    }
}

// The tensor's data as its type, converted a chunk at a time.
static void write_tensor_data(AtomicFile *af, const GgufTensor *t) {
    uint64_t n = tensor_elements(t);
    if (t->type == GGML_TYPE_F32) {
        if (fwrite(t->data, sizeof(float), (size_t)n, af->file) != n) atomic_file_write_failed(af);
        return;
    }
    uint16_t chunk[4096];
    for (uint64_t start = 0; start < n && !af->failed; start += 4096) {
        size_t count = n - start < 4096 ? (size_t)(n - start) : 4096;
        for (size_t i = 0; i < count; i++)
            chunk[i] = t->type == GGML_TYPE_F16 ? gguf_f32_to_f16(t->data[start + i])
                                                : gguf_f32_to_bf16(t->data[start + i]);
        if (fwrite(chunk, 2, count, af->file) != count) atomic_file_write_failed(af);
    }
}

static int write_zeros(AtomicFile *af, uint64_t n) {
    static const unsigned char zeros[GGUF_DEFAULT_ALIGNMENT];
    return n == 0 || fwrite(zeros, 1, (size_t)n, af->file) == n;
}

int gguf_write(const char *path, const GgufMeta *meta, int num_meta, const GgufTensor *tensors,
               int num_tensors, char *err, size_t err_len) {
    if (!check_writable(path, meta, num_meta, tensors, num_tensors, err, err_len)) return 0;
    Bytes header = {0};
    put(&header, GGUF_MAGIC, 4);
    put_u32(&header, GGUF_VERSION);
    put_u64(&header, (uint64_t)num_tensors);
    put_u64(&header, (uint64_t)num_meta);
    for (int i = 0; i < num_meta; i++) put_meta(&header, &meta[i]);
    uint64_t *offsets = xmalloc(sizeof(uint64_t) * (size_t)(num_tensors + 1));
    uint64_t offset = 0;
    for (int i = 0; i < num_tensors; i++) {
        const GgufTensor *t = &tensors[i];
        put_string(&header, t->name);
        put_u32(&header, (uint32_t)t->ndim);
        for (int d = t->ndim - 1; d >= 0; d--) put_u64(&header, (uint64_t)t->shape[d]); // innermost first
        put_u32(&header, (uint32_t)t->type);
        offset = gguf_align_up(offset, GGUF_DEFAULT_ALIGNMENT);
        offsets[i] = offset;
        put_u64(&header, offset);
        offset += tensor_elements(t) * ggml_type_size(t->type);
    }

    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) {
        free(header.bytes);
        free(offsets);
        return 0;
    }
    if (fwrite(header.bytes, 1, header.len, af.file) != header.len ||
        !write_zeros(&af, gguf_align_up(header.len, GGUF_DEFAULT_ALIGNMENT) - header.len))
        atomic_file_write_failed(&af);
    uint64_t written = 0; // in the data section
    for (int i = 0; i < num_tensors && !af.failed; i++) {
        if (!write_zeros(&af, offsets[i] - written)) atomic_file_write_failed(&af);
        write_tensor_data(&af, &tensors[i]);
        written = offsets[i] + tensor_elements(&tensors[i]) * ggml_type_size(tensors[i].type);
    }
    free(header.bytes);
    free(offsets);
    return atomic_file_commit(&af, err, err_len);
}
