// threads.c: the thread count a model's forwards run fastest on now (threads.h).
#include "threads.h"

#include <omp.h>
#include <stdlib.h>

#include "../base/thread_tuner.h"
#include "../base/util.h"

// The tuner tries a neighbouring count after 2 forwards on every core
// (thread_tuner.c: a busy machine shows at once), 2 forwards on it, and
// moves when they are clearly faster; 8 forwards see one such trial and
// the count it chose confirmed.
#define TIMED_FORWARDS 8

int forward_threads(GPT *model, int threads) {
    if (threads > 0) {
        omp_set_num_threads(threads);
        return threads;
    }
    int T = model->config.context;
    int *tokens = xcalloc((size_t)T, sizeof(int)); // what they are changes no time
    gpt_alloc_inference(model, 1, T);
    ThreadTuner tuner;
    thread_tuner_init(&tuner, omp_get_num_procs(), 1);
    thread_tuner_next(&tuner);
    // a cold first forward (page faults, caches), not timed
    gpt_forward(model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    for (int i = 0; i < TIMED_FORWARDS; i++) {
        thread_tuner_next(&tuner);
        double start = now_seconds();
        gpt_forward(model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
        thread_tuner_record(&tuner, now_seconds() - start);
    }
    free(tokens);
    omp_set_num_threads(tuner.current);
    return tuner.current;
}
