// threads.h: the OpenMP thread count for a program that runs a model's
// forwards and no training steps (bin/attn): bin/train's answer to a busy
// machine, its thread tuner (base/thread_tuner.h), over a few forwards of
// one window at start.
#ifndef THREADS_H
#define THREADS_H

#include "../model/gpt.h"

// The thread count to run model's forwards on, set with
// omp_set_num_threads and returned: `threads` when it is above 0 (the
// user's --threads); else OpenMP's own when OMP_NUM_THREADS is set; else
// up to every core, the count whose forwards of one
// context-long window (on model's precision, keeping the attention
// probabilities as the pictures' forwards do) were fastest just now: the
// tuner from one thread up, over 8 steps of at least 20 ms each. Chosen
// once: a load that comes or goes later is not followed, as bin/train's
// steps follow it. Leaves model's activations allocated for that window.
int forward_threads(GPT *model, int threads);

#endif
