// fixtures.h: what several tests build, written once. Temporary folders
// and paths; files read, written and compared whole; the programs run from
// a shell line or spawned (to be signalled, or limited); a corpus; the loss
// columns of a run's log.csv and the step its checkpoint is at; random
// models and their checkpoints; and the gradient checks against central
// differences, for one op and for the whole model.
//
// A fixture that cannot build what it was asked for fails the test with a
// CHECK, or dies where nothing could follow.
#ifndef FIXTURES_H
#define FIXTURES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../base/files.h" // file_exists
#include "../base/util.h"
#include "../data/vocab.h"
#include "../model/gpt.h"

// ---- folders and paths

// A fresh temporary folder; returns its path (static storage per call).
// A new empty folder /tmp/gpt_test_XXXXXX, removed with everything in it
// when the test process exits (GPT_TEST_KEEP=1 keeps it).
const char *make_temp_dir(void);
// rm -rf dir.
void remove_tree(const char *dir);
// "dir/name", in a ring of 16 (keep_path for a path a test holds longer).
const char *path_in(const char *dir, const char *name);
// A file of the checkout by its path there ("tests/page_driver.mjs"): the
// suite runs from the checkout, or from build-san/ (make sanitize), where
// it is one folder up. In a ring of 4.
const char *checkout_path(const char *relative);
// A copy of path in a ring of 64.
const char *keep_path(const char *path);
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
void copy_file(const char *from, const char *to);
// Bytes in the file, -1 if it does not exist.
long file_size(const char *path);
// Both files exist and hold the same bytes.
int same_bytes(const char *a, const char *b);
// Newlines in s (0 for NULL).
int count_lines(const char *s);

// ---- running the programs

// Run a shell command; returns its exit status (or -1), output to /dev/null
// unless capture is given (stdout+stderr written to the file).
int run_command(const char *command, const char *capture_path);

// Without a shell, for a program the test signals or limits:
typedef struct {
    const char *env;      // "NAME=value" added to the environment, or NULL
    long file_size_limit; // RLIMIT_FSIZE in bytes (SIGXFSZ ignored), 0: none
} SpawnOptions;
// Start a program (a command line split at spaces: paths here never hold
// any) with stdout and stderr into capture (/dev/null if NULL). Returns its
// pid.
pid_t spawn(const char *capture, const SpawnOptions *opts, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Split line at spaces, in place, into argv (at most 127 words, then NULL);
// returns their number.
int split_words(char *line, char *argv[128]);
// fork() with the child's stdout and stderr into capture (/dev/null if
// NULL); returns the pid, 0 in the child. Dies if it cannot fork.
pid_t fork_into(const char *capture);
// Exit code (0..255), 1000 + signal if killed by one, -1 if it had to be
// killed after WAIT_SECONDS.
int wait_exit(pid_t pid);
// Wait until the file at path contains text (1), or the process exits or
// WAIT_SECONDS pass (0).
int wait_for_text(pid_t pid, const char *path, const char *text);
// Generous: a sanitizer build on a busy machine is slow; only a hang hits it.
#define WAIT_SECONDS 300
// Run to completion; returns wait_exit's code.
#define RUN(capture, opts, ...) wait_exit(spawn(capture, opts, __VA_ARGS__))
void sleep_ms(long ms);
// What a run printed into capture, or "" (for CHECK_MSG); to be freed.
char *output_of(const char *capture);

// ---- corpora and runs of bin/train

// A tiny model that trains in well under a millisecond per step, on one
// thread so that runs are bit-for-bit reproducible.
#define TINY_ONE_THREAD                                                                      \
    "--layers 1 --heads 2 --dim 16 --context 16 --batch 4 --eval-batches 1 --sample-chars 0 " \
    "--threads 1 --log-every 1"
// The same with every choice of the modern block (dim 24: SwiGLU's 8C/3 is
// whole, 2 heads of 12 for RoPE's pairs).
#define MODERN_BLOCK "--norm rmsnorm --pos rope --rope-base 500 --mlp swiglu --qk-norm --untie " \
                     "--softcap 15 --zero-init-proj"
#define TINY_MODERN                                                                          \
    "--layers 2 --heads 2 --dim 24 --context 16 --batch 4 --eval-batches 1 --sample-chars 0 " \
    "--threads 1 --log-every 1 " MODERN_BLOCK
// The first `bytes` of the default corpus (data/tinyshakespeare.txt), or
// words of a few letters where it is missing or shorter, in a new buffer.
unsigned char *corpus_text(size_t bytes);
// That text written to dir/name; returns the path (path_in's).
const char *make_corpus(const char *dir, const char *name, size_t bytes);
// The same bin/train run (flags, without --threads and --out) on 1 and on
// 2 threads, each into a new folder's "run": their paths into run_1 and
// run_2 (512 bytes each). Checks that both exit 0.
void train_on_1_and_2_threads(const char *flags, char run_1[512], char run_2[512]);
// The first `columns` fields of every row of run/log.csv (the header's
// too), each with the comma after it, a row a line, in a new string; NULL
// without a log. The later columns are timings, which differ run to run.
char *log_columns(const char *run, int columns);
// dir_a/file and dir_b/file, safetensors files, hold the same tensors
// byte for byte (their headers may differ: they hold the run's flags,
// which name its folder).
int same_tensors(const char *dir_a, const char *dir_b, const char *file);
// The step of the optimizer state in the run folder dir that belongs to
// its model (optimizer.safetensors, or the optimizer.prev.safetensors an
// interrupted save keeps: then *from_prev is set), or -1 if neither
// matches; *finite: the model's parameters are all finite. Both pointers
// may be NULL.
long checkpoint_step_of(const char *dir, int *finite, int *from_prev);
// The weights a run folder continues from: its model file's, or the ones
// its optimizer state holds when the model file is an earlier, better
// model (bin/train keeps its best). Returns 0 if they cannot be read.
int load_run_weights(const char *dir, GPT *model, Vocab *vocab);
long checkpoint_step(const char *dir, int *finite);

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
// In a forked child that is to end in die() with memory still allocated
// (none of it a leak): exit with die's status before the sanitizers'
// end-of-process leak check. (on_exit is glibc's alone; the sanitizer
// builds, which need it, are glibc's; elsewhere this does nothing.)
void exit_before_leak_check(void);
// n tokens drawn uniformly from 0..V-1.
void random_tokens(Rng *rng, int *tokens, int n, int V);
// A head's direct-path QK score of two embedding rows x_a, x_b (C), in
// double and unscaled: (x_a W_Q,h^T) . (x_b W_K,h^T), the circuits'
// reference.
double qk_score_reference(const GPT *model, int layer, int head, const float *x_a,
                          const float *x_b);
// The double-precision references' steps (test_lens.c's and
// test_patching.c's forwards): out (C) = LayerNorm(x) with gain w and bias
// b; out (OC) = W (OC,IC) in + b (b may be NULL); -log softmax(logits)[target].
void reference_layernorm(double *out, const double *x, const float *w, const float *b, int C);
void reference_linear(double *out, const double *in, const float *w, const float *b, int ic, int oc);
double reference_loss(const double *logits, int V, int target);
// Split a CSV line into fields in place (a quoted field loses its quotes,
// a doubled quote in it becomes one); returns how many (at most max).
int csv_fields(char *line, char **fields, int max);

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
// A model (allocated for training) and a batch of B rows of T tokens, with
// their targets, and the dropout masks of its forward (NULL: none).
typedef struct {
    GPT *model;
    const int *tokens, *targets;
    int B, T;
    const Dropout *dropout;
} ModelCase;
// The mean loss, summed in double from the per-position losses.
double model_loss(const ModelCase *m);
// The analytic gradient of one parameter (tensor's element `index`, at
// *param) against central differences of model_loss. The step is the one
// actually taken after rounding p +- h to float.
void check_param_gradient(const ModelCase *m, int tensor, float *param, float analytic,
                          size_t index);

// ---- the explorer in headless Chromium

// Whether an explorer page is one file that fetches nothing: a policy that
// forbids all network access, and no address or loading element in it.
int page_fetches_nothing(const char *page);

// Debian's chromium (or another of its names), NULL if none is installed.
const char *find_chromium(void);
// DIR/PAGE (e.g. "index.html#pos=5") as the DOM after its scripts ran,
// with the page's console messages (a blocked request shows there); NULL
// (a failed check) if chromium failed. The caller frees it.
char *chromium_dom(const char *chromium, const char *dir, const char *page);

#endif
