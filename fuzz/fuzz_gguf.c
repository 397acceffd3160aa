// fuzz_gguf.c: libFuzzer target for the GGUF reader (base/gguf.c), what the
// export tests read llama.cpp's files back with: gguf_open, then every
// value read as each kind of number and every string touched, and every
// tensor of a float type read into floats with the shape its infos give.
// A bad file must give a one-line message, never a crash, a leak, or
// undefined behaviour.
#include <string.h>

#include "../tests/gguf_reader.h"
#include "../base/util.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_path(data, size);
    char err[1024];
    err[0] = '\0';
    GgufFile *file = gguf_open(path, err, sizeof err);
    if (!file) {
        fuzz_check_message(err, sizeof err, 1);
        return 0;
    }
    volatile size_t sink = 0;
    for (int i = 0; i < gguf_num_values(file); i++) {
        const GgufValue *v = gguf_value_at(file, i);
        if (gguf_get(file, v->key) != v) abort(); // keys are unique
        uint64_t items = v->count < 64 ? v->count : 64;
        for (uint64_t k = 0; k < items; k++) {
            uint64_t u;
            int64_t s;
            double f;
            sink += (size_t)gguf_value_uint(v, k, &u) + (size_t)gguf_value_int(v, k, &s) +
                    (size_t)gguf_value_float(v, k, &f);
            if (v->strings) sink += strlen(v->strings[k].text);
        }
    }
    for (int i = 0; i < gguf_num_tensors(file); i++) {
        const GgufTensorInfo *t = gguf_tensor_at(file, i);
        if (gguf_find_tensor(file, t->name) != t) abort(); // names are unique
        if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16)
            continue;
        long shape[GGUF_MAX_DIMS];
        uint64_t count = 1;
        for (int d = 0; d < t->ndim; d++) {
            shape[d] = (long)t->ne[t->ndim - 1 - d];
            count *= t->ne[t->ndim - 1 - d];
        }
        if (count > (1u << 24)) continue; // inside the file, but too large to copy quickly
        float *floats = xmalloc(sizeof(float) * (size_t)(count + 1));
        if (!gguf_read_f32(file, t->name, t->ndim, shape, floats, err, sizeof err)) abort();
        free(floats);
    }
    (void)sink;
    gguf_close(file);
    return 0;
}
