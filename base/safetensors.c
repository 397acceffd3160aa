// safetensors.c: the safetensors format (https://huggingface.co/docs/safetensors).
// A file is: u64 little-endian N, N bytes of JSON header, then the data
// section. Header offsets are relative to the start of the data section.
// The JSON is read and written with cJSON; this file only checks what the
// JSON says against the bytes that are really there.
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "util.h"

// Tensor data is written and read as the host's floats, and the format is
// little-endian. The header length is converted explicitly below, the data
// is not, so refuse to build on a big-endian host rather than write files
// nobody else can read.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (tensor data is copied as is)"
#endif

// A header larger than this is corruption, not a model (the Rust reference
// implementation uses the same limit).
#define ST_MAX_HEADER_BYTES (100ull * 1000 * 1000)
// Largest integer a double (cJSON's number type) holds exactly.
#define ST_MAX_JSON_INT 9007199254740992.0

static const struct {
    const char *name;
    size_t bytes;
} DTYPES[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I32", 4},
              {"I64", 8}, {"I16", 2}, {"I8", 1},   {"U8", 1},  {"BOOL", 1}};
#define NUM_DTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))
#define DTYPE_F32 0

typedef struct {
    const char *name; // points into the cJSON header
    int dtype;        // index into DTYPES
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t begin, end; // byte range in the data section
} StEntry;

struct StFile {
    char *path;                 // for error messages
    unsigned char *bytes;       // the whole file
    size_t size;
    const unsigned char *data;  // the data section, inside bytes
    size_t data_size;
    cJSON *header;
    const cJSON *metadata;      // "__metadata__" object, or NULL
    StEntry *entries;
    int num_entries;
};

// ---- shapes

// "[4, 8]" into buf.
static void format_shape(char *buf, size_t len, int ndim, const uint64_t *shape) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, d ? ", %llu" : "%llu",
                                 (unsigned long long)shape[d]);
    if (used < len) snprintf(buf + used, len - used, "]");
}

// Bytes of a tensor: product(shape) * element size. Returns 0 on overflow.
static int shape_bytes(int ndim, const uint64_t *shape, size_t elem_bytes, uint64_t *bytes) {
    uint64_t total = elem_bytes;
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) {
            *bytes = 0;
            return 1;
        }
    for (int d = 0; d < ndim; d++) {
        if (total > UINT64_MAX / shape[d]) return 0;
        total *= shape[d];
    }
    *bytes = total;
    return 1;
}

// ---- writing

// cJSON returns NULL when malloc fails; treat it like xmalloc does.
static cJSON *json_checked(cJSON *item) {
    if (!item) die("out of memory building a safetensors header");
    return item;
}

static void json_add(cJSON *object, const char *key, cJSON *item) {
    if (!cJSON_AddItemToObject(object, key, json_checked(item)))
        die("out of memory building a safetensors header");
}

// Integers go in as raw text: cJSON prints numbers through a double with
// "%1.15g", which turns 10^15 and above into "1e+15" that integer parsers
// (serde's usize in the Rust reader) refuse.
static cJSON *json_uint(uint64_t value) {
    char text[32];
    snprintf(text, sizeof text, "%llu", (unsigned long long)value);
    return json_checked(cJSON_CreateRaw(text));
}

// The JSON header for the given tensors, packed in order from offset 0.
// Returns NULL with a message if the arguments make no sense.
static char *build_header(const char *path, const StTensor *tensors, int num_tensors,
                          const StMeta *meta, int num_meta, char *err, size_t err_len) {
    for (int i = 0; i < num_tensors; i++) {
        const StTensor *t = &tensors[i];
        if (!t->name || strcmp(t->name, "__metadata__") == 0) {
            set_error(err, err_len, "%s: tensor %d has no name or the reserved name __metadata__",
                      path, i);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(tensors[j].name, t->name) == 0) {
                set_error(err, err_len, "%s: tensor '%s' given twice", path, t->name);
                return NULL;
            }
        if (t->ndim < 0 || t->ndim > ST_MAX_DIMS) {
            set_error(err, err_len, "%s: tensor '%s' has %d dimensions, expected 0 to %d", path,
                      t->name, t->ndim, ST_MAX_DIMS);
            return NULL;
        }
        int empty = 0;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) {
                set_error(err, err_len, "%s: tensor '%s' has shape[%d] = %ld, expected >= 0",
                          path, t->name, d, t->shape[d]);
                return NULL;
            }
            if (t->shape[d] == 0) empty = 1;
        }
        if (!empty && !t->data) {
            set_error(err, err_len, "%s: tensor '%s' has no data", path, t->name);
            return NULL;
        }
    }
    for (int i = 0; i < num_meta; i++)
        if (!meta[i].key || !meta[i].value) {
            set_error(err, err_len, "%s: metadata entry %d has no key or no value", path, i);
            return NULL;
        }

    cJSON *root = json_checked(cJSON_CreateObject());
    if (num_meta > 0) {
        cJSON *meta_object = json_checked(cJSON_CreateObject());
        for (int i = 0; i < num_meta; i++)
            json_add(meta_object, meta[i].key, cJSON_CreateString(meta[i].value));
        json_add(root, "__metadata__", meta_object);
    }
    uint64_t offset = 0;
    for (int i = 0; i < num_tensors; i++) {
        const StTensor *t = &tensors[i];
        uint64_t shape[ST_MAX_DIMS], bytes;
        for (int d = 0; d < t->ndim; d++) shape[d] = (uint64_t)t->shape[d];
        if (!shape_bytes(t->ndim, shape, sizeof(float), &bytes) || offset + bytes < offset) {
            set_error(err, err_len, "%s: tensor '%s' is too large", path, t->name);
            cJSON_Delete(root);
            return NULL;
        }
        cJSON *entry = json_checked(cJSON_CreateObject());
        json_add(entry, "dtype", cJSON_CreateString("F32"));
        cJSON *shape_array = json_checked(cJSON_CreateArray());
        for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape_array, json_uint(shape[d]));
        json_add(entry, "shape", shape_array);
        cJSON *offsets = json_checked(cJSON_CreateArray());
        cJSON_AddItemToArray(offsets, json_uint(offset));
        cJSON_AddItemToArray(offsets, json_uint(offset + bytes));
        json_add(entry, "data_offsets", offsets);
        json_add(root, t->name, entry);
        offset += bytes;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) die("out of memory printing a safetensors header");
    return json;
}

int safetensors_write(const char *path, const StTensor *tensors, int num_tensors,
                      const StMeta *meta, int num_meta, char *err, size_t err_len) {
    char *json = build_header(path, tensors, num_tensors, meta, num_meta, err, err_len);
    if (!json) return 0;
    // Pad with spaces so the data section starts 8-byte aligned in the file.
    size_t json_len = strlen(json);
    size_t header_len = (json_len + 7) & ~(size_t)7;
    unsigned char length_bytes[8];
    for (int b = 0; b < 8; b++) length_bytes[b] = (unsigned char)((uint64_t)header_len >> (8 * b));

    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) {
        free(json);
        return 0;
    }
    static const char spaces[8] = "        ";
    if (fwrite(length_bytes, 1, 8, af.file) != 8 || fwrite(json, 1, json_len, af.file) != json_len ||
        fwrite(spaces, 1, header_len - json_len, af.file) != header_len - json_len)
        atomic_file_write_failed(&af);
    for (int i = 0; i < num_tensors && !af.failed; i++) {
        size_t count = 1;
        for (int d = 0; d < tensors[i].ndim; d++) count *= (size_t)tensors[i].shape[d];
        if (count > 0 && fwrite(tensors[i].data, sizeof(float), count, af.file) != count)
            atomic_file_write_failed(&af);
    }
    free(json);
    return atomic_file_commit(&af, err, err_len);
}

// ---- reading

// A JSON number that is a whole number in [0, 2^53]: beyond 2^53 a double
// does not hold every integer, so the value may not be what the file says.
static int json_to_uint(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return 0;
    double v = item->valuedouble;
    if (!isfinite(v) || v < 0 || v > ST_MAX_JSON_INT || v != floor(v)) return 0;
    *out = (uint64_t)v;
    return 1;
}

// The JSON text of an item for a message ("-3", "\"x\"", "1.5").
static void describe_json(const cJSON *item, char *buf, size_t len) {
    char *text = item ? cJSON_PrintUnformatted(item) : NULL;
    snprintf(buf, len, "%s", text ? text : "missing");
    free(text);
}

// Validate one tensor entry of the header into e. Returns 0 with a message.
static int parse_entry(const StFile *file, const cJSON *item, StEntry *e, char *err,
                       size_t err_len) {
    const char *path = file->path, *name = item->string;
    char found[64];
    e->name = name;
    if (!cJSON_IsObject(item)) {
        describe_json(item, found, sizeof found);
        set_error(err, err_len,
                  "%s: tensor '%s': expected an object {dtype, shape, data_offsets}, found %s",
                  path, name, found);
        return 0;
    }
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    if (!cJSON_IsString(dtype)) {
        describe_json(dtype, found, sizeof found);
        set_error(err, err_len, "%s: tensor '%s': dtype is %s, expected a string like \"F32\"",
                  path, name, found);
        return 0;
    }
    e->dtype = -1;
    for (int k = 0; k < NUM_DTYPES; k++)
        if (strcmp(dtype->valuestring, DTYPES[k].name) == 0) e->dtype = k;
    if (e->dtype < 0) {
        set_error(err, err_len,
                  "%s: tensor '%s': unknown dtype '%.32s' (known: F32 F16 BF16 F64 I64 I32 I16 "
                  "I8 U8 BOOL)",
                  path, name, dtype->valuestring);
        return 0;
    }
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    if (!cJSON_IsArray(shape)) {
        describe_json(shape, found, sizeof found);
        set_error(err, err_len, "%s: tensor '%s': shape is %s, expected an array of integers",
                  path, name, found);
        return 0;
    }
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ST_MAX_DIMS) {
        set_error(err, err_len, "%s: tensor '%s': shape has %d dimensions, at most %d supported",
                  path, name, ndim, ST_MAX_DIMS);
        return 0;
    }
    e->ndim = 0;
    for (const cJSON *dim = shape->child; dim; dim = dim->next) {
        if (!json_to_uint(dim, &e->shape[e->ndim])) {
            describe_json(dim, found, sizeof found);
            set_error(err, err_len,
                      "%s: tensor '%s': shape[%d] is %s, expected a non-negative integer", path,
                      name, e->ndim, found);
            return 0;
        }
        e->ndim++;
    }
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !json_to_uint(offsets->child, &e->begin) || !json_to_uint(offsets->child->next, &e->end)) {
        describe_json(offsets, found, sizeof found);
        set_error(err, err_len,
                  "%s: tensor '%s': data_offsets is %s, expected [begin, end], two non-negative "
                  "integers",
                  path, name, found);
        return 0;
    }
    if (e->begin > e->end) {
        set_error(err, err_len, "%s: tensor '%s': data_offsets [%llu, %llu] begin after end",
                  path, name, (unsigned long long)e->begin, (unsigned long long)e->end);
        return 0;
    }
    if (e->end > file->data_size) {
        set_error(err, err_len,
                  "%s: tensor '%s': data_offsets [%llu, %llu] end past the %zu data bytes", path,
                  name, (unsigned long long)e->begin, (unsigned long long)e->end,
                  file->data_size);
        return 0;
    }
    uint64_t needed;
    char shape_text[200];
    format_shape(shape_text, sizeof shape_text, e->ndim, e->shape);
    if (!shape_bytes(e->ndim, e->shape, DTYPES[e->dtype].bytes, &needed)) {
        set_error(err, err_len, "%s: tensor '%s': shape %s is too large", path, name, shape_text);
        return 0;
    }
    if (e->end - e->begin != needed) {
        set_error(err, err_len,
                  "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, shape %s of %s "
                  "needs %llu",
                  path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
                  (unsigned long long)(e->end - e->begin), shape_text, DTYPES[e->dtype].name,
                  (unsigned long long)needed);
        return 0;
    }
    return 1;
}

static int compare_entry_name(const void *a, const void *b) {
    return strcmp(((const StEntry *)a)->name, ((const StEntry *)b)->name);
}

// cJSON keeps duplicate keys, and lookups would silently take the first.
// Sorting, not pairwise comparison, so a header of a million names is fast.
static int check_unique_names(const StFile *file, char *err, size_t err_len) {
    StEntry *sorted = xmalloc(sizeof(StEntry) * (size_t)(file->num_entries + 1));
    memcpy(sorted, file->entries, sizeof(StEntry) * (size_t)file->num_entries);
    qsort(sorted, (size_t)file->num_entries, sizeof(StEntry), compare_entry_name);
    for (int i = 1; i < file->num_entries; i++)
        if (strcmp(sorted[i - 1].name, sorted[i].name) == 0) {
            set_error(err, err_len, "%s: tensor '%s' appears twice in the header", file->path,
                      sorted[i].name);
            free(sorted);
            return 0;
        }
    free(sorted);
    return 1;
}

static int compare_entry_begin(const void *a, const void *b) {
    const StEntry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

// The format requires the tensors to tile the data section exactly: no
// overlap, no holes, nothing after the last. Without this a small file
// could describe many tensors sharing the same bytes.
static int check_tiling(const StFile *file, char *err, size_t err_len) {
    StEntry *sorted = xmalloc(sizeof(StEntry) * (size_t)(file->num_entries + 1));
    memcpy(sorted, file->entries, sizeof(StEntry) * (size_t)file->num_entries);
    qsort(sorted, (size_t)file->num_entries, sizeof(StEntry), compare_entry_begin);
    uint64_t covered = 0;
    for (int i = 0; i < file->num_entries; i++) {
        if (sorted[i].begin != covered) {
            set_error(err, err_len,
                      "%s: tensor '%s': data_offsets [%llu, %llu] %s the previous tensor ending "
                      "at byte %llu",
                      file->path, sorted[i].name, (unsigned long long)sorted[i].begin,
                      (unsigned long long)sorted[i].end,
                      sorted[i].begin < covered ? "overlap" : "leave a gap after",
                      (unsigned long long)covered);
            free(sorted);
            return 0;
        }
        covered = sorted[i].end;
    }
    free(sorted);
    if (covered != file->data_size) {
        set_error(err, err_len, "%s: the tensors cover %llu data bytes, the file has %zu",
                  file->path, (unsigned long long)covered, file->data_size);
        return 0;
    }
    return 1;
}

// Validate the header of a file already in memory.
static int parse_header(StFile *file, char *err, size_t err_len) {
    const char *path = file->path;
    if (file->size < 8) {
        set_error(err, err_len, "%s: truncated: %zu bytes, need at least 8 for the header length",
                  path, file->size);
        return 0;
    }
    uint64_t header_len = 0;
    for (int b = 0; b < 8; b++) header_len |= (uint64_t)file->bytes[b] << (8 * b);
    if (header_len > ST_MAX_HEADER_BYTES) {
        set_error(err, err_len,
                  "%s: header length %llu bytes is over the %llu byte limit (not a safetensors "
                  "file, or corrupt)",
                  path, (unsigned long long)header_len, ST_MAX_HEADER_BYTES);
        return 0;
    }
    if (header_len > file->size - 8) {
        set_error(err, err_len, "%s: truncated: header says %llu bytes, file has %zu after the "
                  "8-byte length",
                  path, (unsigned long long)header_len, file->size - 8);
        return 0;
    }
    file->data = file->bytes + 8 + header_len;
    file->data_size = file->size - 8 - (size_t)header_len;

    // cJSON wants a NUL-terminated string; a NUL inside the header ends the
    // parse early and is caught by the trailing-bytes check.
    char *text = xmalloc((size_t)header_len + 1);
    memcpy(text, file->bytes + 8, (size_t)header_len);
    text[header_len] = '\0';
    const char *end = NULL;
    file->header = cJSON_ParseWithOpts(text, &end, 0);
    if (!file->header) {
        size_t at = end ? (size_t)(end - text) : 0;
        set_error(err, err_len, "%s: header is not valid JSON (error near byte %zu of %llu)", path,
                  at, (unsigned long long)header_len);
        free(text);
        return 0;
    }
    // Only whitespace (the spec's padding) may follow the JSON value.
    for (size_t i = (size_t)(end - text); i < header_len; i++) {
        char c = text[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            set_error(err, err_len,
                      "%s: header has byte 0x%02x at %zu after the JSON value, expected only "
                      "space padding",
                      path, (unsigned char)c, i);
            free(text);
            return 0;
        }
    }
    free(text);
    if (!cJSON_IsObject(file->header)) {
        set_error(err, err_len, "%s: header is not a JSON object {name: tensor, ...}", path);
        return 0;
    }

    int num_items = cJSON_GetArraySize(file->header);
    file->entries = xmalloc(sizeof(StEntry) * (size_t)(num_items + 1));
    for (const cJSON *item = file->header->child; item; item = item->next) {
        const char *name = item->string ? item->string : "";
        if (strcmp(name, "__metadata__") == 0) {
            if (file->metadata) {
                set_error(err, err_len, "%s: __metadata__ appears twice in the header", path);
                return 0;
            }
            if (!cJSON_IsObject(item)) {
                set_error(err, err_len, "%s: __metadata__ is not an object of strings", path);
                return 0;
            }
            for (const cJSON *m = item->child; m; m = m->next)
                if (!cJSON_IsString(m)) {
                    set_error(err, err_len, "%s: __metadata__ value '%s' is not a string", path,
                              m->string ? m->string : "");
                    return 0;
                }
            file->metadata = item;
            continue;
        }
        if (!parse_entry(file, item, &file->entries[file->num_entries], err, err_len)) return 0;
        file->num_entries++;
    }
    return check_unique_names(file, err, err_len) && check_tiling(file, err, err_len);
}

StFile *safetensors_open(const char *path, char *err, size_t err_len) {
    size_t size;
    unsigned char *bytes = read_regular_file(path, &size, err, err_len);
    if (!bytes) return NULL;
    StFile *file = xcalloc(1, sizeof *file);
    file->path = xmalloc(strlen(path) + 1);
    strcpy(file->path, path);
    file->bytes = bytes;
    file->size = size;
    if (!parse_header(file, err, err_len)) {
        if (err && err_len) safetensors_printable(err);
        safetensors_close(file);
        return NULL;
    }
    return file;
}

void safetensors_printable(char *message) {
    for (unsigned char *c = (unsigned char *)message; *c; c++)
        if (*c < 0x20 || *c == 0x7F) *c = '?';
}

void safetensors_close(StFile *file) {
    if (!file) return;
    cJSON_Delete(file->header);
    free(file->entries);
    free(file->bytes);
    free(file->path);
    free(file);
}

static const StEntry *find_entry(const StFile *file, const char *name) {
    for (int i = 0; i < file->num_entries; i++)
        if (strcmp(file->entries[i].name, name) == 0) return &file->entries[i];
    return NULL;
}

int safetensors_check_f32(const StFile *file, const char *name, int ndim, const long *shape,
                          char *err, size_t err_len) {
    const StEntry *e = find_entry(file, name);
    if (!e) {
        set_error(err, err_len, "%s: no tensor '%s'", file->path, name);
        return 0;
    }
    if (e->dtype != DTYPE_F32) {
        set_error(err, err_len, "%s: tensor '%s' is %s, expected F32", file->path, name,
                  DTYPES[e->dtype].name);
        return 0;
    }
    int same = e->ndim == ndim;
    for (int d = 0; d < ndim && same; d++) same = shape[d] >= 0 && (uint64_t)shape[d] == e->shape[d];
    if (!same) {
        uint64_t expected[ST_MAX_DIMS];
        int expected_ndim = ndim < 0 ? 0 : ndim > ST_MAX_DIMS ? ST_MAX_DIMS : ndim;
        for (int d = 0; d < expected_ndim; d++) expected[d] = (uint64_t)shape[d];
        char found_text[200], expected_text[200];
        format_shape(found_text, sizeof found_text, e->ndim, e->shape);
        format_shape(expected_text, sizeof expected_text, expected_ndim, expected);
        set_error(err, err_len, "%s: tensor '%s' has shape %s, expected %s", file->path, name,
                  found_text, expected_text);
        return 0;
    }
    return 1;
}

int safetensors_read_f32(const StFile *file, const char *name, int ndim, const long *shape,
                         float *dst, char *err, size_t err_len) {
    if (!safetensors_check_f32(file, name, ndim, shape, err, err_len)) return 0;
    const StEntry *e = find_entry(file, name);
    // memcpy, not a cast: offsets need not be 4-byte aligned in the file.
    memcpy(dst, file->data + e->begin, (size_t)(e->end - e->begin));
    return 1;
}

const char *safetensors_meta(const StFile *file, const char *key) {
    if (!file->metadata) return NULL;
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(file->metadata, key);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}
