#include "fixtures.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/checkpoint.h"
#include "check.h"

// ---- folders and paths

const char *make_temp_dir(void) {
    static char paths[64][64];
    static int next;
    char *p = paths[next++ % 64];
    snprintf(p, 64, "/tmp/gpt_test_XXXXXX");
    if (!mkdtemp(p)) {
        perror("mkdtemp");
        exit(2);
    }
    return p;
}

const char *path_in(const char *dir, const char *name) {
    static char paths[16][1024];
    static int next;
    char *p = paths[next++ % 16];
    snprintf(p, 1024, "%.500s/%.500s", dir, name);
    return p;
}

// ---- files

unsigned char *read_file_bytes(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = xmalloc((size_t)n + 1);
    size_t got = fread(bytes, 1, (size_t)n, f);
    bytes[got] = '\0';
    fclose(f);
    if (len) *len = got;
    return bytes;
}

char *read_text_file(const char *path) { return (char *)read_file_bytes(path, NULL); }

void write_file_bytes(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len) die("%s: %s", path, strerror(errno));
    fclose(f);
}

int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

// ---- running the programs

int run_command(const char *command, const char *capture_path) {
    char full[8192];
    snprintf(full, sizeof full, "%s >%s 2>&1", command, capture_path ? capture_path : "/dev/null");
    int status = system(full);
    if (status == -1 || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

// ---- runs of bin/train

char *log_columns(const char *run, int columns) {
    char *text = read_text_file(path_in(run, "log.csv"));
    if (!text) return NULL;
    char *out = calloc(strlen(text) + 1, 1), *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int commas = 0;
        size_t n = 0;
        while (line[n] && commas < columns) commas += line[n++] == ',';
        strncat(out, line, n);
        strcat(out, "\n");
    }
    free(text);
    return out;
}

// ---- models

void build_model(GPT *model, const GPTConfig *cfg, RandomWeights weights) {
    gpt_build(model, cfg);
    gpt_init_params(model, weights.init_seed);
    if (weights.spread == 0) return;
    Rng rng;
    rng_seed(&rng, weights.spread_seed);
    for (size_t i = 0; i < model->num_params; i++)
        model->params_memory[i] += weights.spread * rng_normal(&rng);
}

void build_text_model(GPT *model, Vocab *vocab, const char *text, int context,
                      RandomWeights weights) {
    char err[512];
    CHECK(vocab_build(vocab, (const unsigned char *)text, strlen(text), err, sizeof err));
    GPTConfig cfg = {vocab->size, context, 2, 2, 16};
    build_model(model, &cfg, weights);
}

const char *save_text_model(const char *text, int context, RandomWeights weights) {
    static char paths[4][256];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, 256, "%s/model.safetensors", make_temp_dir());
    GPT model;
    Vocab vocab;
    char err[512];
    build_text_model(&model, &vocab, text, context, weights);
    CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    return path;
}

// ---- gradient checks: one op

float *random_normal(Rng *rng, long n, float scale, float offset) {
    float *x = xmalloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) x[i] = offset + scale * rng_normal(rng);
    return x;
}

float *zeros(long n) { return xcalloc((size_t)n, sizeof(float)); }

float *gradient_buffer(long n) {
    float *g = xmalloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) g[i] = GRAD_START;
    return g;
}
