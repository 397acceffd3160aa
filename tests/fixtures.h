// fixtures.h: what several tests build, written once: temporary folders,
// files read and written whole, the programs run from a shell line, the
// loss columns of a run's log.csv, and the random inputs and gradient
// buffers of the gradient checks.
//
// A fixture that cannot build what it was asked for fails the test with a
// CHECK, or dies where nothing could follow.
#ifndef FIXTURES_H
#define FIXTURES_H

#include <stddef.h>
#include <stdint.h>

#include "../base/files.h" // file_exists
#include "../base/util.h"
#include "../data/vocab.h"
#include "../model/gpt.h"

// ---- folders and paths

// A fresh temporary folder; returns its path (static storage per call).
const char *make_temp_dir(void);
// rm -rf dir.
void remove_tree(const char *dir);
// "dir/name", in a ring of 16.
const char *path_in(const char *dir, const char *name);
// Entries of dir whose name contains ".tmp." (left by a save that was cut).
int count_temp_files(const char *dir);

// ---- files

// Read a whole file into a new buffer with a NUL after its bytes (NULL if it
// cannot be opened); its length in *len unless len is NULL.
unsigned char *read_file_bytes(const char *path, size_t *len);
// The same, as a string.
char *read_text_file(const char *path);
// Write bytes to a file (created or truncated); dies if that fails.
void write_file_bytes(const char *path, const void *bytes, size_t len);
// Newlines in s (0 for NULL).
int count_lines(const char *s);

// ---- running the programs

// Run a shell command; returns its exit status (or -1), output to /dev/null
// unless capture is given (stdout+stderr written to the file).
int run_command(const char *command, const char *capture_path);

// ---- runs of bin/train

// The first `columns` fields of every row of run/log.csv (the header's
// too), each with the comma after it, a row a line, in a new string; NULL
// without a log. The later columns are timings, which differ run to run.
char *log_columns(const char *run, int columns);

// ---- models

// V 7, context 6, 2 layers of 2 heads, C 8: small enough to check every
// tensor in a fraction of a second, with every part of the network present.
extern const GPTConfig tiny_config;
// The weights of a random model: GPT-2 initialised from init_seed, then
// spread x N(0,1) (from spread_seed) added to every parameter, so that its
// attention and logits differ clearly from position to position (the 0.02
// init makes every row nearly flat). No spread when spread is 0.
typedef struct {
    uint64_t init_seed;
    float spread;
    uint64_t spread_seed;
} RandomWeights;
// A model of shape cfg with those weights.
void build_model(GPT *model, const GPTConfig *cfg, RandomWeights weights);
// The vocabulary of text's characters in *vocab, and a model over it: 2
// layers of 2 heads, 16 wide, `context` positions.
void build_text_model(GPT *model, Vocab *vocab, const char *text, int context,
                      RandomWeights weights);
// That model saved as model.safetensors in a new temporary folder; returns
// the path (in a ring of 4).
const char *save_text_model(const char *text, int context, RandomWeights weights);
// A model for cfg, GPT-2 initialised, with activations for B_max x T_max.
GPT new_model(const GPTConfig *cfg, int B_max, int T_max, uint64_t seed);
// n tokens drawn uniformly from 0..V-1.
void random_tokens(Rng *rng, int *tokens, int n, int V);

// ---- gradient checks: one op
//
// For an op out = f(x): a fixed random R the shape of out, the scalar loss
// L = sum(out * R) in double (so d_out = R), and the numeric derivative
//   (L(x + h) - L(x - h)) / 2h
// with both forwards in float, one element of x at a time. The reasoning
// for the tolerance is at the top of test_ops.c.

#define GRAD_STEP 1e-3f // h of the central differences
#define GRAD_ATOL 1e-3  // |analytic - numeric| <= ATOL + RTOL * max(|analytic|, |numeric|)
#define GRAD_RTOL 1e-2

// Every backward accumulates (+=) into its d_ outputs. The gradient buffers
// of the checks start at GRAD_START instead of 0 and the checks subtract it,
// so a backward that overwrote (=) would fail them.
#define GRAD_START 1.0f

// n floats offset + scale x N(0,1); zeros; GRAD_START.
float *random_normal(Rng *rng, long n, float scale, float offset);
float *zeros(long n);
float *gradient_buffer(long n);

// L = sum(out * r), in double.
double weighted_sum(const float *out, const float *r, long n);
typedef double (*LossFn)(void *ctx);
// dL/dx[i] by central differences. The step is the one actually taken after
// rounding x +- h to float, which removes an error of ~|x| 6e-8 / h.
double central_difference(float *x, long i, LossFn loss, void *ctx);
// Compare analytic[i] - GRAD_START with the numeric derivative of loss with
// respect to x[i], for every i when samples <= 0 or n <= samples, else for
// `samples` random indices (drawn from rng, which may then not be NULL).
void check_gradient(const char *name, float *x, const float *analytic, long n, long samples,
                    LossFn loss, void *ctx, Rng *rng);

// ---- gradient checks: the whole model
//
// The parameters at the GPT-2 init (std 0.02) make most gradients tiny, too
// close to the rounding noise of a finite difference to say anything, and
// the attention nearly uniform: rescale_params re-initialises them at a
// larger scale. For tiny_config, against (L(p+h) - L(p-h)) / 2h of the mean
// loss, h = 2e-3, the tolerance is
//   |analytic - numeric| <= 2e-4 + 1e-2 max(|analytic|, |numeric|).
// Why: the loss (~2) comes out of two layers of fp32 arithmetic, and a
// perturbed parameter moves every value downstream of it, so the rounding
// no longer cancels between the two forwards: the loss carries a noise of
// ~2e-7 (absolute), ~5e-5 once divided by 2h = 4e-3. The truncation error
// h^2/6 f''' is below 1e-4 (largest for the tied wte, which enters twice).
// Gradients here range from ~1e-3 to ~1 (b_k's is exactly zero: a bias on
// the keys adds the same q.b_k to every score of a row, which the softmax
// ignores). Checking every element over 40 seeds, the worst error was 0.4
// of this tolerance; a wrong or missing term moves a gradient by far more
// than 1%.
#define MODEL_STEP 2e-3f
#define MODEL_ATOL 2e-4
#define MODEL_RTOL 1e-2

// Matrices and embeddings N(0, 0.3^2) (with C = 8, q, k, v, fc and the
// logits come out of order 1), biases N(0, 0.1^2), LayerNorm weights
// 1 + N(0, 0.2^2).
void rescale_params(GPT *model, Rng *rng);
// A model and a batch of B rows of T tokens, with their targets.
typedef struct {
    GPT *model;
    const int *tokens, *targets;
    int B, T;
} ModelCase;
// The mean loss, summed in double from the per-position losses.
double model_loss(const ModelCase *m);
// The analytic gradient of one parameter (tensor's element `index`, at
// *param) against central differences of model_loss. The step is the one
// actually taken after rounding p +- h to float.
void check_param_gradient(const ModelCase *m, int tensor, float *param, float analytic,
                          size_t index);

#endif
