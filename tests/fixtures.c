#include "fixtures.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
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

void remove_tree(const char *dir) {
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    run_command(command, NULL);
}

const char *path_in(const char *dir, const char *name) {
    static char paths[16][1024];
    static int next;
    char *p = paths[next++ % 16];
    snprintf(p, 1024, "%.500s/%.500s", dir, name);
    return p;
}

int count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
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

const GPTConfig tiny_config = {.vocab_size = 7, .context = 6, .layers = 2, .heads = 2, .dim = 8};

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

GPT new_model(const GPTConfig *cfg, int B_max, int T_max, uint64_t seed) {
    GPT model;
    build_model(&model, cfg, (RandomWeights){seed, 0, 0});
    gpt_alloc_training(&model, B_max, T_max);
    return model;
}

void random_tokens(Rng *rng, int *tokens, int n, int V) {
    for (int i = 0; i < n; i++) tokens[i] = (int)rng_below(rng, (uint64_t)V);
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

double weighted_sum(const float *out, const float *r, long n) {
    double sum = 0.0;
    for (long i = 0; i < n; i++) sum += (double)out[i] * r[i];
    return sum;
}

double central_difference(float *x, long i, LossFn loss, void *ctx) {
    float saved = x[i];
    float plus = saved + GRAD_STEP, minus = saved - GRAD_STEP;
    x[i] = plus;
    double loss_plus = loss(ctx);
    x[i] = minus;
    double loss_minus = loss(ctx);
    x[i] = saved;
    return (loss_plus - loss_minus) / ((double)plus - (double)minus);
}

void check_gradient(const char *name, float *x, const float *analytic, long n, long samples,
                    LossFn loss, void *ctx, Rng *rng) {
    int every = samples <= 0 || n <= samples;
    long count = every ? n : samples;
    for (long s = 0; s < count; s++) {
        long i = every ? s : (long)rng_below(rng, (uint64_t)n);
        double numeric = central_difference(x, i, loss, ctx);
        double a = (double)analytic[i] - GRAD_START;
        double tol = GRAD_ATOL + GRAD_RTOL * fmax(fabs(a), fabs(numeric));
        CHECK_MSG(fabs(a - numeric) <= tol, "%s[%ld]: analytic %.7g, numeric %.7g (tol %.3g)", name,
                  i, a, numeric, tol);
    }
}

// ---- gradient checks: the whole model

void rescale_params(GPT *model, Rng *rng) {
    float *t = model->params_memory;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        ParamInit init = param_specs[i].init;
        for (size_t j = 0; j < model->param_sizes[i]; j++) {
            float z = rng_normal(rng);
            t[j] = init == INIT_ONE ? 1.0f + 0.2f * z : param_is_decayed(i) ? 0.3f * z : 0.1f * z;
        }
        t += model->param_sizes[i];
    }
}

double model_loss(const ModelCase *m) {
    gpt_forward(m->model, m->tokens, m->targets, m->B, m->T);
    double sum = 0;
    for (int i = 0; i < m->B * m->T; i++) sum += m->model->acts.losses[i];
    return sum / (m->B * m->T);
}

void check_param_gradient(const ModelCase *m, int tensor, float *param, float analytic,
                          size_t index) {
    float saved = *param;
    float plus = saved + MODEL_STEP, minus = saved - MODEL_STEP;
    *param = plus;
    double loss_plus = model_loss(m);
    *param = minus;
    double loss_minus = model_loss(m);
    *param = saved;
    double numeric = (loss_plus - loss_minus) / ((double)plus - (double)minus);
    double tol = MODEL_ATOL + MODEL_RTOL * fmax(fabs(analytic), fabs(numeric));
    CHECK_MSG(fabs(analytic - numeric) <= tol, "d_%s[%zu]: analytic %.7g, numeric %.7g (tol %.3g)",
              param_specs[tensor].name, index, analytic, numeric, tol);
}
