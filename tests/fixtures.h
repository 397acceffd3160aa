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
// "dir/name", in a ring of 16.
const char *path_in(const char *dir, const char *name);

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

// ---- gradient checks: one op
//
// The reasoning for the tolerance is at the top of test_ops.c.

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

#endif
