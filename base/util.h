// util.h: the one error exit, the one checked allocation, and the seeded
// random number generator shared by initialisation and batch sampling.
#ifndef UTIL_H
#define UTIL_H

#include <stddef.h>
#include <stdint.h>

// Print "error: <message>" on one line to stderr and exit(1).
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
// What die and usage_error end in: "error: <message>" and exit(exit_code),
// unless a hook was set, which is called first and may end the program its
// own way (bin/train under MPI: the processes agree on one message).
void fatal_exit(int exit_code, const char *message) __attribute__((noreturn));
void set_fatal_hook(void (*hook)(int exit_code, const char *message));

// malloc/calloc that die with the requested size when memory runs out, and
// return memory aligned to a 64-byte cache line (release it with free).
void *xmalloc(size_t bytes);
void *xcalloc(size_t count, size_t size);
// count elements of element_size bytes (a power of two up to 64), rounded
// up to whole 64-byte cache lines: buffers carved one after another from
// one such allocation then each start on a line.
static inline size_t whole_cache_lines(size_t count, size_t element_size) {
    size_t per_line = 64 / element_size;
    return (count + per_line - 1) / per_line * per_line;
}
// Bytes xmalloc and xcalloc have handed out since the program started.
size_t xalloc_total_bytes(void);
// A buffer that grows to the largest size asked of it and is then reused
// (no allocation once warm): declare one `static _Thread_local` for
// per-thread scratch.
typedef struct {
    void *data;
    size_t capacity;
} GrowingBuffer;
void *growing_buffer(GrowingBuffer *buffer, size_t bytes);

// Format into a caller's error buffer (used by loaders that report, not exit).
void set_error(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// splitmix64: 64 bits of state, so it saves to a checkpoint as one number.
typedef struct {
    uint64_t state;
} Rng;

void rng_seed(Rng *rng, uint64_t seed);
uint64_t rng_next_u64(Rng *rng);
// Uniform integer in [0, n), n > 0.
uint64_t rng_below(Rng *rng, uint64_t n);
// Uniform float in [0, 1).
float rng_uniform(Rng *rng);
// Standard normal (Box-Muller).
float rng_normal(Rng *rng);

// Wall-clock seconds from a monotonic clock.
double now_seconds(void);

// The median of n > 0 values (the mean of the middle two when n is even),
// sorting them in place.
double median_in_place(double *values, int n);

#endif
