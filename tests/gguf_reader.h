// gguf_reader.h: reading GGUF files (base/gguf.h: the format, and the
// writer bin/export uses), for the tests and the fuzzer, which check what
// bin/export writes: every count, length and offset validated against the
// bytes that are really there, errors in one line.
#ifndef GGUF_READER_H
#define GGUF_READER_H

#include <stddef.h>
#include <stdint.h>

#include "../base/gguf.h"

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

#endif
