// safetensors.h: read and write the safetensors format: 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, ...,
// "__metadata__": {string: string}}, then the raw little-endian tensor data.
// Only F32 tensors are written; reading validates everything and reports
// precisely what is wrong instead of crashing.
#ifndef SAFETENSORS_H
#define SAFETENSORS_H

#include <stddef.h>

#define ST_MAX_DIMS 8

typedef struct {
    const char *name;
    const float *data;
    int ndim;
    long shape[ST_MAX_DIMS];
} StTensor;

typedef struct {
    const char *key;
    const char *value;
} StMeta;

// Write atomically: a temporary file in the same folder, flushed (fsync),
// then renamed over path. On error returns 0, leaves any existing file at
// path untouched, and removes the temporary file.
int safetensors_write(const char *path, const StTensor *tensors, int num_tensors,
                      const StMeta *meta, int num_meta, char *err, size_t err_len);

typedef struct StFile StFile;

// Read and validate a whole file: header length sane, JSON well formed,
// every entry with a known dtype, a shape, and data_offsets inside the data
// that agree with the shape. Returns NULL with a message on error.
StFile *safetensors_open(const char *path, char *err, size_t err_len);
void safetensors_close(StFile *file);

// Copy tensor `name` into dst, checking it exists, is F32 and has exactly
// the given shape. Returns 0 with a message otherwise.
int safetensors_read_f32(const StFile *file, const char *name, int ndim, const long *shape,
                         float *dst, char *err, size_t err_len);
// The checks of safetensors_read_f32 without the copy: lets a loader verify
// every tensor against a config before allocating anything for it.
int safetensors_check_f32(const StFile *file, const char *name, int ndim, const long *shape,
                          char *err, size_t err_len);
// A metadata value, or NULL if the key is absent.
const char *safetensors_meta(const StFile *file, const char *key);
// Replace control characters (bytes below 0x20, and 0x7F) with '?' in an
// error message that quotes a file's own text (tensor names, metadata), so
// it stays one line and a crafted file cannot send escape sequences to the
// terminal. The readers here and in checkpoint.c call it on every error.
void safetensors_printable(char *message);

#endif
