// check.h: a minimal test harness. A test is a void function; it fails if
// any CHECK inside it fails. The runner prints one line per test, with the
// number of checks it evaluated, and ends with "N passed, N failed".
#ifndef CHECK_H
#define CHECK_H

#include <math.h>
#include <stddef.h>

typedef void (*TestFn)(void);

void run_test(const char *name, TestFn fn);
// Marks the current test failed and prints file:line and the message.
void check_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Called inside a test: it is counted as skipped (with the reason, e.g. an
// optional tool that is not installed) rather than passed, unless a check
// in it failed. The runner's last line then adds ", N skipped".
void skip_test(const char *reason);
// Returns the number of checks failed so far in the current test.
int current_test_failures(void);
// Checks evaluated so far in the current test (each CHECK adds one).
extern long checks_in_test;

#define CHECK(cond)                                                      \
    do {                                                                 \
        checks_in_test++;                                                \
        if (!(cond)) check_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); \
    } while (0)

#define CHECK_MSG(cond, ...)                                          \
    do {                                                              \
        checks_in_test++;                                             \
        if (!(cond)) check_fail(__FILE__, __LINE__, __VA_ARGS__);     \
    } while (0)

// 1 in a build under AddressSanitizer (make sanitize), else 0. There a test
// may run a smaller case of what it checks (fewer steps, a smaller batch):
// the sanitizers look for memory errors and undefined behaviour, which the
// same code reaches in a few steps as in hundreds, at twenty times the
// cost. What only learning shows (a head forming) is checked by the plain
// run; every test still asserts behaviour in both.
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_SANITIZERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_SANITIZERS 1
#endif
#endif
#ifndef UNDER_SANITIZERS
#define UNDER_SANITIZERS 0
#endif

// |a - b| <= tol
#define CHECK_NEAR(a, b, tol)                                                         \
    do {                                                                              \
        double check_a_ = (a), check_b_ = (b), check_t_ = (tol);                      \
        checks_in_test++;                                                             \
        if (!(fabs(check_a_ - check_b_) <= check_t_))                                 \
            check_fail(__FILE__, __LINE__, "%s = %.9g, expected %s = %.9g (tol %g)", #a, \
                       check_a_, #b, check_b_, check_t_);                              \
    } while (0)

#endif
