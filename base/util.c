// util.c: the error exit, aligned checked allocation, the seeded generator, the clock.
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void (*fatal_hook)(int exit_code, const char *message);

void set_fatal_hook(void (*hook)(int exit_code, const char *message)) { fatal_hook = hook; }

void fatal_exit(int exit_code, const char *message) {
    fflush(stdout);
    if (fatal_hook) fatal_hook(exit_code, message); // may not return
    fprintf(stderr, "error: %s\n", message);
    exit(exit_code);
}

void die(const char *fmt, ...) {
    char message[4096];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    fatal_exit(1, message);
}

// Every buffer starts on a cache line: the matrix kernels load rows of 64
// bytes (an AVX-512 register), and a row that straddles two lines costs two
// loads. malloc only promises 16 bytes, which halved the kernels' speed.
enum { ALIGNMENT = 64 };

// Bytes requested so far, so a test can hold the memory estimate against
// what is really allocated.
static _Atomic size_t bytes_allocated;

size_t xalloc_total_bytes(void) { return bytes_allocated; }

void *xmalloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, ALIGNMENT, bytes ? bytes : 1) != 0)
        die("out of memory allocating %zu bytes", bytes);
    bytes_allocated += bytes;
    return p;
}

void *xcalloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size)
        die("out of memory allocating %zu x %zu bytes", count, size);
    size_t bytes = count * size;
    void *p = NULL;
    if (posix_memalign(&p, ALIGNMENT, bytes ? bytes : 1) != 0)
        die("out of memory allocating %zu x %zu bytes", count, size);
    bytes_allocated += bytes;
    return memset(p, 0, bytes);
}

void *growing_buffer(GrowingBuffer *buffer, size_t bytes) {
    if (bytes > buffer->capacity) {
        free(buffer->data);
        buffer->data = xmalloc(bytes);
        buffer->capacity = bytes;
    }
    return buffer->data;
}

void set_error(char *err, size_t err_len, const char *fmt, ...) {
    if (!err || err_len == 0) return;
    va_list args;
    va_start(args, fmt);
    vsnprintf(err, err_len, fmt, args);
    va_end(args);
}

void rng_seed(Rng *rng, uint64_t seed) { rng->state = seed; }

uint64_t rng_next_u64(Rng *rng) {
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t rng_below(Rng *rng, uint64_t n) {
    // Rejection sampling removes the modulo bias.
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = rng_next_u64(rng);
    while (r >= limit);
    return r % n;
}

float rng_uniform(Rng *rng) { return (float)(rng_next_u64(rng) >> 40) / 16777216.0f; }

float rng_normal(Rng *rng) {
    // Box-Muller in double; u1 in (0, 1] so the log is finite.
    double u1 = ((double)(rng_next_u64(rng) >> 11) + 1.0) / 9007199254740992.0;
    double u2 = (double)(rng_next_u64(rng) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double median_in_place(double *values, int n) {
    for (int i = 1; i < n; i++) // insertion sort: a handful of step times
        for (int j = i; j > 0 && values[j - 1] > values[j]; j--) {
            double swap = values[j];
            values[j] = values[j - 1];
            values[j - 1] = swap;
        }
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}
