// thread_tuner.h: how many OpenMP threads make a training step fastest now,
// measured on the steps themselves.
//
// On a quiet machine every core helps. With another busy process on one of
// the cores, the thread on that core runs only part of the time, and every
// parallel region waits for it at its barrier: measured here, the default
// recipe took 3x longer with 2 threads than with 1 (README, Performance).
// No wait policy fixes both cases (spinning steals the busy core; sleeping
// doubles the quiet step), so the trainer asks the steps: it runs on the
// count it has, now and then times a step or two on a neighbouring count, and
// moves when that is clearly faster. Every sum is taken in the same order
// whatever the thread count, so moving changes no bit of the results.
//
// A trial is two steps, or one when the first is far slower. Trials are
// spaced further apart each time they confirm the count (from 20 steps up
// to 640), and far enough apart that what they cost stays near 2% of the
// time. A load that lifts is noticed within one interval; one that comes
// (a core taken since) makes the steps far slower, and two such steps in a
// row bring a trial at once: an interval of steps 10 to 40 times slower
// would be minutes.
#ifndef THREAD_TUNER_H
#define THREAD_TUNER_H

#define TUNER_RECENT 8

typedef struct {
    int max_threads; // the most it may use (the cores, or --threads)
    int current;     // the count the steps run on
    int trial;       // 0, or the count being timed
    int trial_steps_left;
    double trial_best;             // the faster of the trial's steps, seconds
    double trial_seconds;          // the trial's steps together
    int trial_steps;
    double recent[TUNER_RECENT];   // the latest step times on `current`
    int recent_count;
    long steps_to_trial;           // steps on `current` before the next trial
    long interval;                 // steps between trials
    int last_direction;            // the neighbour tried last: -1 fewer, +1 more
    int slow_steps;                // steps in a row far slower than the recent ones
} ThreadTuner;

// Start on max_threads; with tune 0, stay there (the user chose --threads).
void thread_tuner_init(ThreadTuner *tuner, int max_threads, int tune);

// The thread count for the next step (also set with omp_set_num_threads).
int thread_tuner_next(ThreadTuner *tuner);

// How long that step took (training only: no evaluation or saving).
void thread_tuner_record(ThreadTuner *tuner, double seconds);

#endif
