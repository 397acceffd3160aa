// gguf.h: read and write GGUF, the file format of ggml and llama.cpp
// (version 3, little-endian). A file is: the magic "GGUF", the version
// (u32), the tensor count and the metadata count (u64 each); the metadata,
// each a key (a string: u64 length, then its bytes) with a typed value;
// the tensors' infos (name, dimensions, ggml type, offset); padding to the
// alignment (general.alignment, 32 when absent); then the tensors' data,
// each at an offset that is a multiple of the alignment.
//
// Shapes: ggml lists a tensor's dimensions innermost first (ne[0] is the
// one whose elements are adjacent), the reverse of PyTorch's and
// safetensors'. This interface takes and gives row-major shapes, outermost
// first as PyTorch writes them: a weight [out, in] is written as
// ne = {in, out}. The reader's infos (GgufTensorInfo) keep the file's order.
//
// Only what a small model needs is written: F32 tensors, or F16 and BF16
// converted from F32 (round to nearest even). The reader validates
// everything a file says against the bytes that are really there and
// reports what is wrong in one line, instead of crashing; it reads the
// unquantized types, and refuses quantized ones by name. The reader is the
// tests' (tests/gguf_reader.h): no program reads GGUF.
#ifndef GGUF_H
#define GGUF_H

#include <stddef.h>
#include <stdint.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
// ggml's GGML_MAX_NAME, its terminating NUL included
#define GGUF_MAX_NAME 64

// The metadata value types, as the file numbers them.
typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} GgufType;

// The tensor types this code reads (ggml's numbering); the others are
// quantized blocks, refused by name.
typedef enum {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_I8 = 24,
    GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26,
    GGML_TYPE_I64 = 27,
    GGML_TYPE_F64 = 28,
    GGML_TYPE_BF16 = 30,
} GgmlType;

// "F32", "BF16", "Q4_K", ...; "type 99" for a number ggml does not have.
const char *ggml_type_name(uint32_t type, char buf[16]);
// Bytes of one element of an unquantized ggml type (0 for a quantized or
// unknown one), and of one scalar of a value type (0 for STRING and ARRAY).
size_t ggml_type_size(uint32_t type);
size_t gguf_value_type_size(GgufType type);
// offset rounded up to a multiple of alignment (an aligned offset as it is,
// even near the top of the range: the reader meets hostile ones).
static inline uint64_t gguf_align_up(uint64_t offset, uint64_t alignment) {
    return offset + (alignment - offset % alignment) % alignment;
}

// ---- writing

// One metadata entry to write: a scalar (UINT32, INT32, FLOAT32, BOOL,
// UINT64, STRING) or an ARRAY of items of item_type (STRING, INT32,
// UINT32, FLOAT32). Made with the constructors below.
typedef struct {
    const char *key;
    GgufType type;
    GgufType item_type; // ARRAY only
    uint64_t count;     // ARRAY only: its items
    union {
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        float f32;
        int boolean;
        const char *string;          // NUL-terminated UTF-8
        const char *const *strings;  // (count)
        const int32_t *i32s;         // (count)
        const uint32_t *u32s;        // (count)
        const float *f32s;           // (count)
    } value;
} GgufMeta;

static inline GgufMeta gguf_meta_u32(const char *key, uint32_t v) {
    return (GgufMeta){.key = key, .type = GGUF_TYPE_UINT32, .value.u32 = v};
}
static inline GgufMeta gguf_meta_f32(const char *key, float v) {
    return (GgufMeta){.key = key, .type = GGUF_TYPE_FLOAT32, .value.f32 = v};
}
static inline GgufMeta gguf_meta_bool(const char *key, int v) {
    return (GgufMeta){.key = key, .type = GGUF_TYPE_BOOL, .value.boolean = v};
}
static inline GgufMeta gguf_meta_string(const char *key, const char *v) {
    return (GgufMeta){.key = key, .type = GGUF_TYPE_STRING, .value.string = v};
}
static inline GgufMeta gguf_meta_strings(const char *key, const char *const *v, uint64_t n) {
    return (GgufMeta){.key = key, .type = GGUF_TYPE_ARRAY, .item_type = GGUF_TYPE_STRING,
                      .count = n, .value.strings = v};
}
static inline GgufMeta gguf_meta_i32s(const char *key, const int32_t *v, uint64_t n) {
    return (GgufMeta){.key = key, .type = GGUF_TYPE_ARRAY, .item_type = GGUF_TYPE_INT32,
                      .count = n, .value.i32s = v};
}
static inline GgufMeta gguf_meta_f32s(const char *key, const float *v, uint64_t n) {
    return (GgufMeta){.key = key, .type = GGUF_TYPE_ARRAY, .item_type = GGUF_TYPE_FLOAT32,
                      .count = n, .value.f32s = v};
}

// One tensor to write: fp32 data in row-major order, its shape outermost
// first (PyTorch's), stored as `type` (F32, F16 or BF16).
typedef struct {
    const char *name; // at most GGUF_MAX_NAME - 1 bytes
    const float *data;
    int ndim;         // 1 .. GGUF_MAX_DIMS
    long shape[GGUF_MAX_DIMS];
    GgmlType type;
} GgufTensor;

// Write atomically (a temporary file beside path, fsync, rename): the
// metadata in the order given, the tensors in the order given, aligned to
// GGUF_DEFAULT_ALIGNMENT. On error returns 0 with a message, leaves any
// file at path untouched and removes the temporary file.
int gguf_write(const char *path, const GgufMeta *meta, int num_meta, const GgufTensor *tensors,
               int num_tensors, char *err, size_t err_len);

// ---- the conversions (round to nearest even; NaN stays NaN)
uint16_t gguf_f32_to_f16(float f);
float gguf_f16_to_f32(uint16_t h);
uint16_t gguf_f32_to_bf16(float f);
float gguf_bf16_to_f32(uint16_t b);

#endif
