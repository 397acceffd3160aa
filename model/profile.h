// profile.h: per-op timers for `make bench`. Compiled in only with
// -DPROFILE_OPS; in normal builds TIMED(op, call) is just the call.
#ifndef PROFILE_H
#define PROFILE_H

enum {
    OP_MATMUL_FWD,
    OP_MATMUL_BWD,
    OP_ATTN_FWD,
    OP_ATTN_BWD,
    OP_LAYERNORM,
    OP_GELU,
    OP_SOFTMAX_LOSS,
    OP_EMBED_RESIDUAL,
    NUM_PROFILED_OPS
};

#ifdef PROFILE_OPS
#include "../base/util.h"
extern double op_seconds[NUM_PROFILED_OPS];
extern const char *const op_names[NUM_PROFILED_OPS];
#define TIMED(op, call)                          \
    do {                                         \
        double timed_start_ = now_seconds();     \
        call;                                    \
        op_seconds[op] += now_seconds() - timed_start_; \
    } while (0)
#else
#define TIMED(op, call) call
#endif

#endif
