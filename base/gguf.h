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
// unquantized types, and refuses quantized ones by name.
#ifndef GGUF_H
#define GGUF_H

#include <stddef.h>
#include <stdint.h>

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

// ---- reading

typedef struct GgufFile GgufFile;

// Read and validate a whole file: magic, version (2 or 3), counts that fit
// in the file, every key once, known value types, booleans 0 or 1, arrays
// of scalars or strings (not of arrays), general.alignment a power of two;
// tensor names unique and under GGUF_MAX_NAME bytes, 1 to 4 dimensions, an
// unquantized type, data aligned, inside the file and not overlapping.
// Returns NULL with a one-line message naming the file on error.
GgufFile *gguf_open(const char *path, char *err, size_t err_len);
void gguf_close(GgufFile *file);

// A string as the file holds it: len bytes at text, then a NUL the reader
// added (text may hold other NULs: len says where it ends).
typedef struct {
    const char *text;
    uint64_t len;
} GgufString;

// A metadata value: a scalar (count 1), or an ARRAY of count items of
// item_type. Numbers are read with gguf_value_uint, _int and _float,
// strings from strings[0 .. count).
typedef struct {
    const char *key;
    GgufType type;
    GgufType item_type;       // ARRAY only
    uint64_t count;
    const unsigned char *raw; // numbers and booleans as the file holds them (count items)
    const GgufString *strings; // STRING, or an ARRAY of STRING
} GgufValue;

int gguf_version(const GgufFile *file);
uint32_t gguf_alignment(const GgufFile *file);
int gguf_num_values(const GgufFile *file);
const GgufValue *gguf_value_at(const GgufFile *file, int i);
// The value of key, or NULL when the file has none.
const GgufValue *gguf_get(const GgufFile *file, const char *key);
// Item i (0 for a scalar) of an integer value as a non-negative integer,
// a signed one, or any number as a double; booleans are integers 0 or 1.
// Returns 0 when the value is not of such a type, or i is past its items.
int gguf_value_uint(const GgufValue *value, uint64_t i, uint64_t *out);
int gguf_value_int(const GgufValue *value, uint64_t i, int64_t *out);
int gguf_value_float(const GgufValue *value, uint64_t i, double *out);

typedef struct {
    const char *name;
    int ndim;
    uint64_t ne[GGUF_MAX_DIMS]; // the file's order: ne[0] innermost
    uint32_t type;              // GgmlType
    uint64_t offset, bytes;     // in the data section
} GgufTensorInfo;

int gguf_num_tensors(const GgufFile *file);
const GgufTensorInfo *gguf_tensor_at(const GgufFile *file, int i);
const GgufTensorInfo *gguf_find_tensor(const GgufFile *file, const char *name);
// The bytes of a tensor's data (info->bytes of them), inside the file.
const unsigned char *gguf_tensor_data(const GgufFile *file, const GgufTensorInfo *info);
// Copy tensor `name` into dst as fp32 (converting F16 and BF16), checking
// that it exists, is F32, F16 or BF16, and has exactly the given row-major
// shape. Returns 0 with a message otherwise.
int gguf_read_f32(const GgufFile *file, const char *name, int ndim, const long *shape,
                  float *dst, char *err, size_t err_len);

// ---- the conversions (round to nearest even; NaN stays NaN)
uint16_t gguf_f32_to_f16(float f);
float gguf_f16_to_f32(uint16_t h);
uint16_t gguf_f32_to_bf16(float f);
float gguf_bf16_to_f32(uint16_t b);

#endif
