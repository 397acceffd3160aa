// average.h: an averaged copy of the weights, kept beside the last ones
// while training (bin/train's --ema): the exponential moving average with
// decay d, corrected for its start as AdamW corrects its moments, so that
// after step t it is the weighted mean of the weights after steps 1..t,
// step s weighing d^(t-s):
//   avg_t = avg_{t-1} + c_t (w_t - avg_{t-1}),   c_t = (1 - d) / (1 - d^t)
// from avg_0 = 0 (c_1 = 1, so avg_1 = w_1 exactly). It looks back about
// 1/(1-d) steps. The average never feeds the training; an evaluation
// swaps it into the model, evaluates, and swaps it out again.
#ifndef AVERAGE_H
#define AVERAGE_H

#include <stddef.h>

typedef struct {
    float decay;      // d in (0, 1)
    float *params;    // (num_params) the average, laid out as the model's parameters
    size_t num_params;
} Average;

// An average of num_params weights (allocated here, zero: no step yet).
void average_init(Average *avg, float decay, size_t num_params);
void average_free(Average *avg);

// c_t: the weight of step t's weights (t >= 1) in the running average.
float average_rate(float decay, long t);

// Take in the weights w (num_params) after step t (t >= 1, the optimizer's
// count after its update). Each element on its own, so the bits are the
// same for any thread count.
void average_update(Average *avg, const float *w, long t);

// Exchange the weights w (num_params) and the average: the model then
// holds the average; a second call puts both back.
void average_swap(Average *avg, float *w);

#endif
