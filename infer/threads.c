// threads.c: the thread count a model's forwards run fastest on now (threads.h).
#include "threads.h"

#include <omp.h>
#include <stdlib.h>

#include "../base/thread_tuner.h"
#include "../base/util.h"

// The tuner tries a neighbouring count after 2 steps on every core
// (thread_tuner.c: a busy machine shows at once), 2 steps on it, and moves
// when they are clearly faster; 8 steps see one such trial and the count
// it chose confirmed. A step is forwards until STEP_SECONDS have passed
// (at least one), timed per forward: the scheduler shares a busy core in
// slices of milliseconds, which one short forward may fall between.
#define TIMED_STEPS 8
#define STEP_SECONDS 0.02

int forward_threads(GPT *model, int threads) {
    if (threads > 0) {
        omp_set_num_threads(threads);
        return threads;
    }
    // the user's OMP_NUM_THREADS, as OpenMP read it, is a choice too
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env) return omp_get_max_threads();
    int T = model->config.context;
    int *tokens = xcalloc((size_t)T, sizeof(int)); // what they are changes no time
    gpt_alloc_inference(model, 1, T);
    ThreadTuner tuner;
    thread_tuner_init(&tuner, omp_get_num_procs(), 1);
    // From one thread up, not every core down as bin/train's steps: on a
    // busy machine one forward on every core can take seconds (each
    // parallel region waits for the thread whose core is taken), and a
    // trial of more threads ends at its first slow step.
    tuner.current = 1;
    thread_tuner_next(&tuner);
    // a cold first forward (page faults, caches, the products' set-up), not timed
    gpt_forward(model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    for (int i = 0; i < TIMED_STEPS; i++) {
        thread_tuner_next(&tuner);
        double start = now_seconds(), seconds;
        int forwards = 0;
        do {
            gpt_forward(model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
            forwards++;
            seconds = now_seconds() - start;
        } while (seconds < STEP_SECONDS);
        thread_tuner_record(&tuner, seconds / forwards);
    }
    free(tokens);
    omp_set_num_threads(tuner.current);
    return tuner.current;
}
