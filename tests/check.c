#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int tests_passed, tests_failed, tests_skipped, failures_in_test;
static long checks_in_all_tests;
static const char *skip_reason;
long checks_in_test;

// Tests left out by `--skip TEXT` (their names contain TEXT): counted as
// skipped, not run.
enum { MAX_PATTERNS = 32 };
static const char *left_out[MAX_PATTERNS];
static int left_out_count;

static const char *left_out_by(const char *name) {
    for (int i = 0; i < left_out_count; i++)
        if (strstr(name, left_out[i])) return left_out[i];
    return NULL;
}

void check_fail(const char *file, int line, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    failures_in_test++;
    if (failures_in_test <= 10) {
        fprintf(stdout, "    %s:%d: ", file, line);
        vfprintf(stdout, fmt, args);
        fputc('\n', stdout);
    }
    va_end(args);
}

int current_test_failures(void) { return failures_in_test; }

void skip_test(const char *reason) { skip_reason = reason; }

void run_test(const char *name, TestFn fn) {
    const char *skip_text = left_out_by(name);
    if (skip_text) {
        tests_skipped++;
        printf("skip %s (--skip '%s')\n", name, skip_text);
        fflush(stdout);
        return;
    }
    failures_in_test = 0;
    checks_in_test = 0;
    skip_reason = NULL;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    fn();
    clock_gettime(CLOCK_MONOTONIC, &end);
    // its wall time, to find the slow ones (never a pass or fail criterion)
    double seconds = (double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) * 1e-9;
    checks_in_all_tests += checks_in_test;
    if (skip_reason && failures_in_test == 0) {
        tests_skipped++;
        printf("skip %s (%s; %ld checks, %.1f s)\n", name, skip_reason, checks_in_test, seconds);
    } else if (failures_in_test == 0) {
        tests_passed++;
        printf("ok   %s (%ld checks, %.1f s)\n", name, checks_in_test, seconds);
    } else {
        tests_failed++;
        printf("FAIL %s (%d of %ld checks failed, %.1f s)\n", name, failures_in_test, checks_in_test,
               seconds);
    }
    fflush(stdout);
}

// Suites, one per file; each calls run_test for its tests. Weak, so a build
// of a subset of the test files still links (a missing suite is skipped).
#define SUITE(name) void name(void) __attribute__((weak))
SUITE(suite_data);
SUITE(suite_ops);
SUITE(suite_attention);
SUITE(suite_fused_attention);
SUITE(suite_model);
SUITE(suite_checkpoint);
SUITE(suite_train);
SUITE(suite_sample);
SUITE(suite_heatmap);
SUITE(suite_robust_signals);
SUITE(suite_robust_disk_faults);
SUITE(suite_robust_divergence);
SUITE(suite_robust_bad_options);
SUITE(suite_robust_bad_corpora);
SUITE(suite_robust_fuzz);
SUITE(suite_layout);
SUITE(suite_bf16);
SUITE(suite_bf16_attention);
SUITE(suite_inference);
SUITE(suite_atlas);
SUITE(suite_lens);
SUITE(suite_recipes);
SUITE(suite_mpi);
SUITE(suite_threads);
SUITE(suite_optimizer);
SUITE(suite_muon);
SUITE(suite_export);
SUITE(suite_user_files);
SUITE(suite_modern);
SUITE(suite_attn_modern);
SUITE(suite_first_hour);
SUITE(suite_patching);
SUITE(suite_induction);
SUITE(suite_explore);
SUITE(suite_average);

static int wanted(const char *suite, char **names, int count) {
    for (int i = 0; i < count; i++)
        if (strstr(suite, names[i])) return 1;
    return count == 0;
}

// bin/tests [SUITE...] [--skip TEXT]...: the suites whose name contains one
// of the SUITE arguments (all without one), less the tests whose name
// contains a TEXT.
int main(int argc, char **argv) {
    char *only[MAX_PATTERNS];
    int only_count = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--skip") && i + 1 < argc && left_out_count < MAX_PATTERNS)
            left_out[left_out_count++] = argv[++i];
        else if (argv[i][0] != '-' && only_count < MAX_PATTERNS)
            only[only_count++] = argv[i];
        else {
            fprintf(stderr, "usage: bin/tests [SUITE...] [--skip TEXT]... (at most %d of each)\n",
                    MAX_PATTERNS);
            return 2;
        }
    }
    struct {
        const char *name;
        void (*fn)(void);
    } suites[] = {{"data", suite_data},           {"ops", suite_ops},
                  {"attention", suite_attention}, {"fused-attention", suite_fused_attention},
                  {"model", suite_model},
                  {"checkpoint", suite_checkpoint}, {"train", suite_train},
                  {"sample", suite_sample}, {"heatmap", suite_heatmap},
                  {"robust-signals", suite_robust_signals},
                  {"robust-disk-faults", suite_robust_disk_faults},
                  {"robust-divergence", suite_robust_divergence},
                  {"robust-bad-options", suite_robust_bad_options},
                  {"robust-bad-corpora", suite_robust_bad_corpora},
                  {"robust-fuzz", suite_robust_fuzz},
                  {"layout", suite_layout}, {"bf16", suite_bf16},
                  {"bf16-attention", suite_bf16_attention}, {"inference", suite_inference},
                  {"atlas", suite_atlas}, {"lens", suite_lens}, {"recipes", suite_recipes},
                  {"mpi", suite_mpi}, {"threads", suite_threads}, {"optimizer", suite_optimizer},
                  {"muon", suite_muon}, {"user-files", suite_user_files},
                  {"modern", suite_modern}, {"attn-modern", suite_attn_modern},
                  {"export", suite_export}, {"first-hour", suite_first_hour},
                  {"patching", suite_patching}, {"induction", suite_induction},
                  {"explore", suite_explore}, {"average", suite_average}};
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
        if (!suites[i].fn || !wanted(suites[i].name, only, only_count)) continue;
        printf("# %s\n", suites[i].name);
        suites[i].fn();
    }
    printf("%ld checks evaluated\n", checks_in_all_tests);
    if (tests_skipped)
        printf("%d passed, %d failed, %d skipped\n", tests_passed, tests_failed, tests_skipped);
    else
        printf("%d passed, %d failed\n", tests_passed, tests_failed);
    return tests_failed ? 1 : 0;
}
