#include "check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/files.h"
#include "../base/util.h"

static int tests_passed, tests_failed, tests_skipped, failures_in_test;
static long checks_in_all_tests;
static const char *skip_reason;
long checks_in_test;

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
    failures_in_test = 0;
    checks_in_test = 0;
    skip_reason = NULL;
    fn();
    checks_in_all_tests += checks_in_test;
    if (skip_reason && failures_in_test == 0) {
        tests_skipped++;
        printf("skip %s (%s; %ld checks)\n", name, skip_reason, checks_in_test);
    } else if (failures_in_test == 0) {
        tests_passed++;
        printf("ok   %s (%ld checks)\n", name, checks_in_test);
    } else {
        tests_failed++;
        printf("FAIL %s (%d of %ld checks failed)\n", name, failures_in_test, checks_in_test);
    }
    fflush(stdout);
}

int run_command(const char *command, const char *capture_path) {
    char full[8192];
    snprintf(full, sizeof full, "%s >%s 2>&1", command, capture_path ? capture_path : "/dev/null");
    int status = system(full);
    if (status == -1 || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

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

// Suites, one per file; each calls run_test for its tests. Weak, so a build
// of a subset of the test files still links (a missing suite is skipped).
#define SUITE(name) void name(void) __attribute__((weak))
SUITE(suite_data);
SUITE(suite_ops);
SUITE(suite_attention);
SUITE(suite_model);
SUITE(suite_checkpoint);
SUITE(suite_train);
SUITE(suite_sample);
SUITE(suite_heatmap);
SUITE(suite_robust);
SUITE(suite_layout);
SUITE(suite_bf16);
SUITE(suite_bf16_attention);
SUITE(suite_inference);
SUITE(suite_atlas);
SUITE(suite_recipes);
SUITE(suite_mpi);
SUITE(suite_threads);
SUITE(suite_optimizer);

int main(int argc, char **argv) {
    // An optional argument runs only the suites whose name contains it.
    const char *only = argc > 1 ? argv[1] : NULL;
    struct {
        const char *name;
        void (*fn)(void);
    } suites[] = {{"data", suite_data},           {"ops", suite_ops},
                  {"attention", suite_attention}, {"model", suite_model},
                  {"checkpoint", suite_checkpoint}, {"train", suite_train},
                  {"sample", suite_sample}, {"heatmap", suite_heatmap}, {"robust", suite_robust},
                  {"layout", suite_layout}, {"bf16", suite_bf16},
                  {"bf16-attention", suite_bf16_attention}, {"inference", suite_inference},
                  {"atlas", suite_atlas}, {"recipes", suite_recipes}, {"mpi", suite_mpi},
                  {"threads", suite_threads}, {"optimizer", suite_optimizer}};
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
        if (!suites[i].fn || (only && !strstr(suites[i].name, only))) continue;
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
