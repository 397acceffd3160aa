// test_muon.c: Muon. Newton-Schulz against the polar factor computed in
// double (by a Jacobi eigen-decomposition), and against the same iteration
// in double; one Muon update against double; then bin/train --optimizer
// muon: it lowers the loss, gives the same bits on 1 and 2 threads and
// across --resume, and refuses a resumed run whose optimizer differs and
// bad flags.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "../base/util.h"
#include "../optim/adamw.h"
#include "../optim/muon.h"

// ---- double-precision references

// Eigen-decomposition of the symmetric n x n matrix a (destroyed) by cyclic
// Jacobi rotations: a = V diag(values) V^T, V's columns the eigenvectors.
static void jacobi_eigen(double *a, int n, double *vectors, double *values) {
    for (int i = 0; i < n * n; i++) vectors[i] = i / n == i % n;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0.0;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) off += a[p * n + q] * a[p * n + q];
        if (off < 1e-30) break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                if (fabs(a[p * n + q]) < 1e-300) continue;
                double theta = (a[q * n + q] - a[p * n + p]) / (2.0 * a[p * n + q]);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (int k = 0; k < n; k++) { // columns p, q of a
                    double akp = a[k * n + p], akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) { // rows p, q
                    double apk = a[p * n + k], aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < n; k++) {
                    double vkp = vectors[k * n + p], vkq = vectors[k * n + q];
                    vectors[k * n + p] = c * vkp - s * vkq;
                    vectors[k * n + q] = s * vkp + c * vkq;
                }
            }
    }
    for (int i = 0; i < n; i++) values[i] = a[i * n + i];
}

// x (r,c), r <= c, in double: m (r,r) = X X^T.
static void gram(double *m, const double *x, int r, int c) {
    for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++) {
            double sum = 0.0;
            for (int k = 0; k < c; k++) sum += x[i * c + k] * x[j * c + k];
            m[i * r + j] = sum;
        }
}

// The polar factor P (r,c) = (G G^T)^(-1/2) G of a wide g (r,c) of full rank.
static void polar_factor(double *p, const double *g, int r, int c) {
    double *m = xmalloc((size_t)r * r * sizeof(double)), *v = xmalloc((size_t)r * r * sizeof(double));
    double *values = xmalloc((size_t)r * sizeof(double)), *inv_root = xcalloc((size_t)r * r, sizeof(double));
    gram(m, g, r, c);
    jacobi_eigen(m, r, v, values);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++)
            for (int k = 0; k < r; k++)
                inv_root[i * r + j] += v[i * r + k] * v[j * r + k] / sqrt(values[k]);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) {
            double sum = 0.0;
            for (int k = 0; k < r; k++) sum += inv_root[i * r + k] * g[k * c + j];
            p[i * c + j] = sum;
        }
    free(m), free(v), free(values), free(inv_root);
}

// The quintic iteration itself in double, on a wide g (r,c): out (r,c).
static void newton_schulz_double(double *out, const double *g, int r, int c, int steps) {
    double norm = 0.0;
    for (int i = 0; i < r * c; i++) norm += g[i] * g[i];
    norm = sqrt(norm) + 1e-7;
    double *x = xmalloc((size_t)r * c * sizeof(double)), *a = xmalloc((size_t)r * r * sizeof(double));
    double *b = xmalloc((size_t)r * r * sizeof(double)), *next = xmalloc((size_t)r * c * sizeof(double));
    for (int i = 0; i < r * c; i++) x[i] = g[i] / norm;
    for (int s = 0; s < steps; s++) {
        gram(a, x, r, c);
        for (int i = 0; i < r; i++)
            for (int j = 0; j < r; j++) {
                double a2 = 0.0;
                for (int k = 0; k < r; k++) a2 += a[i * r + k] * a[k * r + j];
                b[i * r + j] = (double)MUON_NS_B * a[i * r + j] + (double)MUON_NS_C * a2;
            }
        for (int i = 0; i < r; i++)
            for (int j = 0; j < c; j++) {
                double sum = (double)MUON_NS_A * x[i * c + j];
                for (int k = 0; k < r; k++) sum += b[i * r + k] * x[k * c + j];
                next[i * c + j] = sum;
            }
        memcpy(x, next, (size_t)r * c * sizeof(double));
    }
    memcpy(out, x, (size_t)r * c * sizeof(double));
    free(x), free(a), free(b), free(next);
}

// m (rows,cols) read as its wide orientation (r,c): transposed when tall.
static double *wide_copy(const float *m, int rows, int cols) {
    int tall = rows > cols, c = tall ? rows : cols;
    double *w = xmalloc((size_t)rows * cols * sizeof(double));
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            w[tall ? j * c + i : i * c + j] = m[i * cols + j];
    return w;
}

// ---- Newton-Schulz

// For a random Gaussian G of shape rows x cols (3:1, so its singular values
// over its Frobenius norm are all above 0.05), in fp32 and bf16:
//   O's singular values are in the quintic's band [0.68, 1.135] (muon.h);
//   its singular vectors are G's: with P G's polar factor, H = O P^T is
//   symmetric and O = H P (O's rows in P's row space), so O = U S' V^T
//   where P = U V^T;
//   O is the iteration done in double, within the rounding of 5 steps.
static void check_newton_schulz(int rows, int cols, Precision precision) {
    Rng rng;
    rng_seed(&rng, 17 + rows);
    int r = rows < cols ? rows : cols, c = rows < cols ? cols : rows;
    float *g = random_normal(&rng, (long)rows * cols, 1.0f, 0.0f);
    float *out = xmalloc((size_t)rows * cols * sizeof(float));
    float *scratch = xmalloc(newton_schulz_scratch_floats(rows, cols) * sizeof(float));
    Products pr;
    products_init(&pr, precision, bf16_best_kernel(BF16_AMX));
    newton_schulz(&pr, out, g, rows, cols, MUON_NS_STEPS, scratch);
    double *gw = wide_copy(g, rows, cols), *o = wide_copy(out, rows, cols);
    double *p = xmalloc((size_t)r * c * sizeof(double)), *reference = xmalloc((size_t)r * c * sizeof(double));
    polar_factor(p, gw, r, c);
    newton_schulz_double(reference, gw, r, c, MUON_NS_STEPS);
    // bf16 rounds each product's inputs (2^-9 relative) at every step
    double tol = precision == PRECISION_BF16 ? 3e-2 : 2e-4;
    double worst = 0.0;
    for (int i = 0; i < r * c; i++) worst = fmax(worst, fabs(o[i] - reference[i]));
    CHECK_MSG(worst <= tol, "%dx%d %s: |O - double iteration| up to %.3g", rows, cols,
              precision_name(precision), worst);
    // H = O P^T (r,r), symmetric; O - H P small
    double *h = xcalloc((size_t)r * r, sizeof(double));
    for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++)
            for (int k = 0; k < c; k++) h[i * r + j] += o[i * c + k] * p[j * c + k];
    double asymmetry = 0.0, residual = 0.0, o_norm = 0.0;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++) asymmetry = fmax(asymmetry, fabs(h[i * r + j] - h[j * r + i]));
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) {
            double hp = 0.0;
            for (int k = 0; k < r; k++) hp += h[i * r + k] * p[k * c + j];
            residual += (o[i * c + j] - hp) * (o[i * c + j] - hp);
            o_norm += o[i * c + j] * o[i * c + j];
        }
    CHECK_MSG(asymmetry <= tol, "%dx%d: O P^T asymmetric by %.3g", rows, cols, asymmetry);
    CHECK_MSG(sqrt(residual / o_norm) <= tol, "%dx%d: O outside P's row space by %.3g (relative)",
              rows, cols, sqrt(residual / o_norm));
    // O's singular values: square roots of O O^T's eigenvalues
    double *m = xmalloc((size_t)r * r * sizeof(double)), *v = xmalloc((size_t)r * r * sizeof(double));
    double *values = xmalloc((size_t)r * sizeof(double));
    gram(m, o, r, c);
    jacobi_eigen(m, r, v, values);
    double lowest = 1e9, highest = 0.0;
    for (int i = 0; i < r; i++) {
        lowest = fmin(lowest, sqrt(fmax(values[i], 0.0)));
        highest = fmax(highest, sqrt(fmax(values[i], 0.0)));
    }
    CHECK_MSG(lowest >= 0.68 - tol && highest <= 1.135 + tol,
              "%dx%d %s: singular values %.4f .. %.4f, outside [0.68, 1.135]", rows, cols,
              precision_name(precision), lowest, highest);
    // ... and not all 1: the quintic stops short of the polar factor itself
    CHECK(highest - lowest > 0.01);
    products_free(&pr);
    free(g), free(out), free(scratch), free(gw), free(o), free(p), free(reference), free(h);
    free(m), free(v), free(values);
}

static void test_newton_schulz_fp32(void) {
    check_newton_schulz(16, 48, PRECISION_FP32);
    check_newton_schulz(48, 16, PRECISION_FP32); // taller than wide: worked on transposed
    check_newton_schulz(40, 120, PRECISION_FP32);
}

static void test_newton_schulz_bf16(void) {
    check_newton_schulz(16, 48, PRECISION_BF16);
    check_newton_schulz(120, 40, PRECISION_BF16);
}

// Newton-Schulz's Gram matrices (A = X X^T, A^2 = A A^T) are multiplied
// from their upper triangle only and mirrored (muon.c): every bit must be
// what the full products give. The reference here runs the iteration with
// full products (linear_forward over all rows) and is compared byte by byte.
static void newton_schulz_full_products(Products *pr, float *out, const float *g, int rows,
                                        int cols) {
    int tall = rows > cols, r = tall ? cols : rows, c = tall ? rows : cols;
    size_t rc = (size_t)r * c, rr = (size_t)r * r;
    float *x = xmalloc(rc * sizeof(float)), *next = xmalloc(rc * sizeof(float));
    float *a = xmalloc(rr * sizeof(float)), *b = xmalloc(rr * sizeof(float));
    float inv_norm = (float)(1.0 / ((double)grad_global_norm(g, rc) + 1e-7));
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            float value = g[(size_t)i * cols + j] * inv_norm;
            if (tall) x[(size_t)j * c + i] = value;
            else x[(size_t)i * c + j] = value;
        }
    for (int step = 0; step < MUON_NS_STEPS; step++) {
        linear_forward(pr, a, x, x, NULL, r, c, r);
        linear_forward(pr, b, a, a, NULL, r, r, r);
        for (size_t i = 0; i < rr; i++) b[i] = MUON_NS_B * a[i] + MUON_NS_C * b[i];
        for (size_t i = 0; i < rc; i++) next[i] = MUON_NS_A * x[i];
        linear_backward(pr, NULL, next, NULL, b, x, x, r, c, r);
        float *swap = x;
        x = next;
        next = swap;
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            out[(size_t)i * cols + j] = tall ? x[(size_t)j * c + i] : x[(size_t)i * c + j];
    free(x), free(next), free(a), free(b);
}

static void test_newton_schulz_symmetric_products_exact(void) {
    const int shapes[][2] = {{100, 36}, {72, 200}, {128, 128}, {33, 65}};
    for (int prec = 0; prec < 2; prec++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int rows = shapes[s][0], cols = shapes[s][1];
            Precision precision = prec ? PRECISION_BF16 : PRECISION_FP32;
            Rng rng;
            rng_seed(&rng, 5 + (unsigned)s);
            float *g = random_normal(&rng, (long)rows * cols, 1.0f, 0.0f);
            float *fast = xmalloc((size_t)rows * cols * sizeof(float));
            float *full = xmalloc((size_t)rows * cols * sizeof(float));
            float *scratch = xmalloc(newton_schulz_scratch_floats(rows, cols) * sizeof(float));
            Products pr;
            products_init(&pr, precision, bf16_best_kernel(BF16_AMX));
            newton_schulz(&pr, fast, g, rows, cols, MUON_NS_STEPS, scratch);
            newton_schulz_full_products(&pr, full, g, rows, cols);
            CHECK_MSG(!memcmp(fast, full, (size_t)rows * cols * sizeof(float)),
                      "%dx%d %s: the upper-triangle Gram matrices change bits", rows, cols,
                      precision_name(precision));
            products_free(&pr);
            free(g), free(fast), free(full), free(scratch);
        }
}

// ---- one update

// Two Muon updates of a small model's matrices, with clipping scales 1 and
// 0.5, against the same update in double (the momentum, Nesterov's
// look-ahead, the iteration in double, the shape's scale, the decay): the
// float update differs by the iteration's rounding (2e-4 of O, above) times
// lr. Every other tensor is left alone, and AdamW, told to skip the
// matrices, leaves them alone.
static void test_muon_update_matches_double(void) {
    GPTConfig cfg = {.vocab_size = 11, .context = 8, .layers = 2, .heads = 2, .dim = 16};
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 5);
    gpt_alloc_training(&model, 1, cfg.context);
    size_t n = model.num_params;
    Muon muon;
    muon_init(&muon, n);
    muon_reserve(&muon, &model);
    double *p = xmalloc(n * sizeof(double)), *m = xcalloc(n, sizeof(double));
    float *before = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = model.params_memory[i];
    const float lr = 0.02f, decay = 0.1f, scales[2] = {1.0f, 0.5f};
    Rng rng;
    rng_seed(&rng, 3);
    for (int step = 0; step < 2; step++) {
        float *g = random_normal(&rng, (long)n, 1.0f, 0.0f);
        memcpy(model.grads_memory, g, n * sizeof(float));
        memcpy(before, model.params_memory, n * sizeof(float));
        muon_update(&muon, &model, lr, decay, scales[step]);
        size_t offset = 0;
        double worst = 0.0;
        int untouched = 1;
        for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
            size_t size = model.param_sizes[t];
            if (!muon_owns(t)) {
                untouched &= !memcmp(before + offset, model.params_memory + offset, size * sizeof(float));
                offset += size;
                continue;
            }
            long rows, cols;
            param_shape(&cfg, t, &rows, &cols);
            int r = rows < cols ? (int)rows : (int)cols, c = rows < cols ? (int)cols : (int)rows;
            double *u = xmalloc((size_t)(rows * cols) * sizeof(double));
            double *o = xmalloc((size_t)(rows * cols) * sizeof(double));
            for (size_t first = offset; first < offset + size; first += (size_t)(rows * cols)) {
                for (long i = 0; i < rows * cols; i++) {
                    double grad = (double)g[first + i] * scales[step];
                    m[first + i] = 0.95 * m[first + i] + 0.05 * grad;
                    double look = 0.05 * grad + 0.95 * m[first + i];
                    long row = i / cols, col = i % cols; // u in the wide orientation
                    u[rows > cols ? col * c + row : row * c + col] = look;
                }
                newton_schulz_double(o, u, r, c, MUON_NS_STEPS);
                double shape_scale = sqrt(fmax(1.0, (double)rows / cols));
                for (long i = 0; i < rows * cols; i++) {
                    long row = i / cols, col = i % cols;
                    double orth = o[rows > cols ? col * c + row : row * c + col];
                    p[first + i] -= lr * (decay * p[first + i] + shape_scale * orth);
                    worst = fmax(worst, fabs(p[first + i] - model.params_memory[first + i]));
                    p[first + i] = model.params_memory[first + i]; // follow the float run
                }
            }
            free(u), free(o);
            offset += size;
        }
        CHECK_MSG(worst <= lr * 4e-4, "step %d: a matrix is %.3g from double", step, worst);
        CHECK(untouched);
        free(g);
    }
    // AdamW told to skip Muon's matrices leaves them (and their moments) alone
    AdamW adamw;
    adamw_init(&adamw, n);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) adamw.skip[t] = (unsigned char)muon_owns(t);
    AdamWConfig acfg = {.lr = 1e-2f, .min_lr = 1e-3f, .iters = 10, .beta1 = 0.9f, .beta2 = 0.99f,
                        .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
    memcpy(before, model.params_memory, n * sizeof(float));
    adamw_update(&adamw, &model, &acfg, 1e-2f, 1.0f);
    size_t offset = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t size = model.param_sizes[t];
        int same = !memcmp(before + offset, model.params_memory + offset, size * sizeof(float));
        if (size) // a tensor this block does not use has nothing to update
            CHECK_MSG(same == muon_owns(t), "tensor %d: AdamW %s it", t, same ? "skipped" : "updated");
        offset += size;
    }
    // Muon owns exactly the blocks' six matrices
    int owned = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) owned += muon_owns(t);
    CHECK(owned == 6 && muon_owns(PARAM_w_q) && muon_owns(PARAM_proj_w) && !muon_owns(PARAM_wte) &&
          !muon_owns(PARAM_b_q));
    adamw_free(&adamw);
    free(p), free(m), free(before);
    muon_free(&muon);
    gpt_free(&model);
}

// ---- bin/train --optimizer muon

#define MUON_RUN                                                                           \
    "bin/train --optimizer muon --layers 2 --heads 2 --dim 32 --context 16 --batch 8 "     \
    "--eval-batches 4 --log-every 10 --sample-chars 0 --warmup 5"

// The validation loss in run/log.csv's row for `step` (-1 if none).
static float val_loss_at(const char *run, long step) {
    char *log = log_columns(run, 3), *save = NULL;
    float loss = -1.0f;
    for (char *line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *comma = strrchr(line, ',');
        if (atol(line) == step && comma > line) {
            *comma = 0; // the val loss is the third field, before the last comma
            const char *val = strrchr(line, ',');
            if (val && val[1]) loss = (float)atof(val + 1);
        }
    }
    free(log);
    return loss;
}

// 60 steps lower the validation loss from ln(V) (4.2 with this text's ~65
// characters): below 3.9 at step 30, lower at 60; the same on 1 and 2
// threads, bit for bit.
static void test_muon_trains_same_on_any_threads(void) {
    const char *dir = make_temp_dir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MUON_RUN " --iters 60 --eval-every 30 --threads 1 --out %s/one", dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, MUON_RUN " --iters 60 --eval-every 30 --threads 2 --out %s/two", dir);
    CHECK(run_command(cmd, NULL) == 0);
    float val30 = val_loss_at(path_in(dir, "one"), 30), val60 = val_loss_at(path_in(dir, "one"), 60);
    CHECK_MSG(val30 > 0 && val30 < 3.9f && val60 < val30, "val loss %.4f at step 30, %.4f at 60",
              val30, val60);
    char *la = log_columns(path_in(dir, "one"), 4), *lb = log_columns(path_in(dir, "two"), 4);
    CHECK(la && lb && !strcmp(la, lb));
    free(la), free(lb);
    CHECK(same_bytes(keep_path(path_in(dir, "one/model.safetensors")),
                     path_in(dir, "two/model.safetensors")));
    CHECK(same_tensors(keep_path(path_in(dir, "one")), path_in(dir, "two"), "optimizer.safetensors"));
    remove_tree(dir);
}

// Stopped at step 7 and resumed: the same losses, model and momentum as
// the run that went straight through.
static void test_muon_resume_equals_straight_run(void) {
    const char *dir = make_temp_dir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MUON_RUN " --iters 16 --eval-every 8 --threads 1 --out %s/straight", dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, MUON_RUN " --iters 16 --eval-every 8 --threads 1 --stop-at 7 --out %s/resumed",
             dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "bin/train --resume --out %s/resumed", dir);
    const char *capture = keep_path(path_in(dir, "resume.txt"));
    CHECK(run_command(cmd, capture) == 0);
    char *text = output_of(capture);
    CHECK_MSG(strstr(text, "resuming") && strstr(text, "step 7"), "%s", text);
    free(text);
    char *la = log_columns(path_in(dir, "straight"), 4), *lb = log_columns(path_in(dir, "resumed"), 4);
    CHECK(la && lb);
    if (la && lb) CHECK_MSG(!strcmp(la, lb), "straight:\n%s\nresumed:\n%s", la, lb);
    free(la), free(lb);
    CHECK(same_bytes(keep_path(path_in(dir, "straight/model.safetensors")),
                     path_in(dir, "resumed/model.safetensors")));
    CHECK_MSG(same_tensors(keep_path(path_in(dir, "straight")), path_in(dir, "resumed"),
                           "optimizer.safetensors"), "the momentum or moments differ");
    remove_tree(dir);
}

// A resumed run keeps its optimizer: the other one given is refused (exit
// 1, the folder untouched), both ways; an AdamW folder from before Muon
// (no optimizer in its file) resumes as AdamW.
static void test_resume_with_other_optimizer_refused(void) {
    const char *dir = make_temp_dir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MUON_RUN " --iters 4 --eval-every 4 --threads 1 --out %s/muon", dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd,
             "bin/train --layers 1 --heads 2 --dim 16 --context 16 --batch 4 --eval-batches 1 "
             "--sample-chars 0 --iters 4 --threads 1 --out %s/adamw", dir);
    CHECK(run_command(cmd, NULL) == 0);
    const struct {
        const char *run, *given, *expect;
    } cases[] = {{"adamw", "muon", "--optimizer muon: the run in"},
                 {"muon", "adamw", "--optimizer adamw: the run in"}};
    for (int i = 0; i < 2; i++) {
        const char *model = keep_path(path_in(path_in(dir, cases[i].run), "model.safetensors"));
        unsigned char *was = read_file_bytes(model, NULL);
        snprintf(cmd, sizeof cmd, "bin/train --resume --iters 8 --optimizer %s --out %s/%s",
                 cases[i].given, dir, cases[i].run);
        const char *capture = keep_path(path_in(dir, "refused.txt"));
        CHECK(run_command(cmd, capture) == 1);
        char *text = output_of(capture);
        CHECK_MSG(strstr(text, cases[i].expect) && strstr(text, "keeps its optimizer") &&
                      count_lines(text) == 1, "%s", text);
        free(text);
        size_t len;
        unsigned char *now = read_file_bytes(model, &len);
        CHECK(was && now && !memcmp(was, now, len));
        free(was), free(now);
    }
    // the AdamW folder (its file holds no optimizer) resumes
    snprintf(cmd, sizeof cmd, "bin/train --resume --iters 6 --out %s/adamw", dir);
    CHECK(run_command(cmd, NULL) == 0);
    CHECK(checkpoint_step(path_in(dir, "adamw"), NULL) == 6);
    remove_tree(dir);
}

// Bad flags: one line each, exit 2, nothing written.
static void test_bad_muon_and_schedule_flags(void) {
    const char *dir = make_temp_dir();
    const struct {
        const char *flags, *expect;
    } cases[] = {{"--optimizer sgd", "--optimizer sgd: expected adamw or muon"},
                 {"--schedule linear", "--schedule linear: expected cosine or wsd"},
                 {"--optimizer muon --muon-lr 0", "--muon-lr 0: must be above 0"},
                 {"--optimizer muon --muon-lr -0.01", "--muon-lr -0.01: must be above 0"},
                 {"--decay-from 100", "--decay-from is for --schedule wsd"},
                 {"--schedule wsd --decay-from 50 --warmup 100", "--decay-from 50: must be between"},
                 {"--schedule wsd --decay-from 3000", "--decay-from 3000: must be between"},
                 {"--schedule wsd --minutes 1 --decay-from 300", "--minutes and --decay-from contradict"},
                 {"--replans 500", "--replans 500: expected STEP:END pairs"},
                 {"--replans 500:400", "--replans 500:400: 500:400: each STEP must be past"},
                 {"--replans 500:900,400:1000", "each STEP must be past --warmup 100 and the STEP before"},
                 {"--replans 2500:3000", "the last re-plan, at step 2500, is not below --iters 2000"},
                 {"--schedule wsd --replans 500:900", "--replans is for the cosine"},
                 {"--minutes 1 --replans 500:900", "--minutes and --replans contradict"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "bin/train %s --out %s/run", cases[i].flags, dir);
        const char *capture = keep_path(path_in(dir, "err.txt"));
        int status = run_command(cmd, capture);
        char *text = output_of(capture);
        CHECK_MSG(status == 2 && strstr(text, cases[i].expect) && count_lines(text) == 1,
                  "%s: exit %d, %s", cases[i].flags, status, text);
        free(text);
        CHECK(!file_exists(path_in(dir, "run")));
    }
    remove_tree(dir);
}

void suite_muon(void) {
    run_test("muon: Newton-Schulz in fp32 against the double polar factor and iteration",
             test_newton_schulz_fp32);
    run_test("muon: Newton-Schulz in bf16 against the double polar factor and iteration",
             test_newton_schulz_bf16);
    run_test("muon: Newton-Schulz's Gram matrices from their upper triangle, every bit the full "
             "products'", test_newton_schulz_symmetric_products_exact);
    run_test("muon: two updates match double; AdamW skips Muon's matrices",
             test_muon_update_matches_double);
    run_test("muon: bin/train --optimizer muon lowers the loss, the same on 1 and 2 threads",
             test_muon_trains_same_on_any_threads);
    run_test("muon: a resumed run equals the straight one", test_muon_resume_equals_straight_run);
    run_test("muon: a resumed run with another optimizer is refused; AdamW files resume",
             test_resume_with_other_optimizer_refused);
    run_test("muon: bad --optimizer, --schedule, --muon-lr, --decay-from, --replans are refused",
             test_bad_muon_and_schedule_flags);
}
