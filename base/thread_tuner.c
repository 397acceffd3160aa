// thread_tuner.c: the thread count that makes steps fastest now (thread_tuner.h).
#include "thread_tuner.h"

#include <omp.h>
#include <string.h>

#include "util.h"

#define FIRST_INTERVAL 20
#define LONGEST_INTERVAL 640
#define TRIAL_STEPS 2
// A trial must beat the current count by this much to move (the noise of
// step times on a steady machine is a few percent).
#define CLEARLY_FASTER 0.92
#define HOPELESS 1.5
// Steps timed on a count before it is compared with a neighbour.
#define FIRST_SAMPLES 2
// A step on the current count this much slower than its recent ones, twice
// in a row: the load changed.
#define LOAD_CHANGED 2.0
#define TRIAL_SHARE 50

#define NEVER (1L << 62)

void thread_tuner_init(ThreadTuner *tuner, int max_threads, int tune) {
    memset(tuner, 0, sizeof *tuner);
    tuner->max_threads = max_threads > 1 ? max_threads : 1;
    tuner->current = tuner->max_threads;
    tuner->interval = FIRST_INTERVAL;
    tuner->steps_to_trial = tune ? FIRST_SAMPLES : NEVER; // a busy machine shows at once
    tuner->last_direction = 1;
}

// The median of the recent step times (sorted copy; at most 8 of them).
static double recent_median(const ThreadTuner *tuner) {
    double sorted[TUNER_RECENT];
    int n = tuner->recent_count < TUNER_RECENT ? tuner->recent_count : TUNER_RECENT;
    memcpy(sorted, tuner->recent, (size_t)n * sizeof *sorted);
    return median_in_place(sorted, n);
}

// The neighbour to try: the other side from last time where both exist.
static int neighbour(ThreadTuner *tuner) {
    int fewer = tuner->current - 1, more = tuner->current + 1;
    int can_fewer = fewer >= 1, can_more = more <= tuner->max_threads;
    if (can_fewer && can_more) tuner->last_direction = -tuner->last_direction;
    else if (can_fewer) tuner->last_direction = -1;
    else if (can_more) tuner->last_direction = 1;
    else return 0;
    return tuner->current + tuner->last_direction;
}

int thread_tuner_next(ThreadTuner *tuner) {
    if (!tuner->trial && tuner->steps_to_trial <= 0 && tuner->recent_count >= FIRST_SAMPLES) {
        tuner->trial = neighbour(tuner);
        tuner->trial_steps_left = TRIAL_STEPS;
        tuner->trial_best = 1e300;
        tuner->trial_seconds = 0.0;
        tuner->trial_steps = 0;
        if (!tuner->trial) tuner->steps_to_trial = NEVER; // one thread: nothing to try
    }
    int threads = tuner->trial ? tuner->trial : tuner->current;
    if (threads != omp_get_max_threads()) omp_set_num_threads(threads);
    return threads;
}

void thread_tuner_record(ThreadTuner *tuner, double seconds) {
    if (!tuner->trial) {
        int slower = tuner->recent_count >= FIRST_SAMPLES &&
                     seconds > LOAD_CHANGED * recent_median(tuner);
        tuner->slow_steps = slower ? tuner->slow_steps + 1 : 0;
        if (tuner->slow_steps == 2 && tuner->steps_to_trial < NEVER / 2) {
            // the count is timed again from the next steps (a passing
            // hiccup, and the trial finds it as fast as before), then a
            // neighbour is tried, not an interval later
            tuner->recent_count = 0;
            tuner->steps_to_trial = 0;
            tuner->slow_steps = 0;
            return;
        }
        tuner->recent[tuner->recent_count++ % TUNER_RECENT] = seconds;
        tuner->steps_to_trial--;
        return;
    }
    double usual = recent_median(tuner);
    tuner->trial_seconds += seconds;
    tuner->trial_steps++;
    if (seconds < tuner->trial_best) tuner->trial_best = seconds;
    // a first step far slower ends the trial at once (on a busy core a trial
    // step can cost several ordinary ones)
    int hopeless = seconds > HOPELESS * usual;
    if (--tuner->trial_steps_left > 0 && !hopeless) return;
    if (tuner->trial_best < CLEARLY_FASTER * usual) {
        tuner->current = tuner->trial; // move, and look again soon
        tuner->recent_count = 0;
        tuner->interval = FIRST_INTERVAL;
        tuner->steps_to_trial = FIRST_INTERVAL;
    } else {
        // The next trial waits twice as long, and long enough that trials
        // cost at most about 1/TRIAL_SHARE of the steps' time.
        double lost_steps = (tuner->trial_seconds - tuner->trial_steps * usual) / usual;
        long affordable = (long)(TRIAL_SHARE * lost_steps);
        tuner->interval = 2 * tuner->interval > affordable ? 2 * tuner->interval : affordable;
        if (tuner->interval > LONGEST_INTERVAL) tuner->interval = LONGEST_INTERVAL;
        tuner->steps_to_trial = tuner->interval;
    }
    tuner->trial = 0;
}
