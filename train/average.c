// average.c: the weights' exponential moving average (see average.h).
#include "average.h"

#include <math.h>
#include <stdlib.h>

#include "../base/util.h"

void average_init(Average *avg, float decay, size_t num_params) {
    avg->decay = decay;
    avg->num_params = num_params;
    avg->params = xcalloc(num_params, sizeof(float));
}

void average_free(Average *avg) {
    free(avg->params);
    avg->params = NULL;
}

float average_rate(float decay, long t) {
    return (float)((1.0 - (double)decay) / (1.0 - pow((double)decay, (double)t)));
}

void average_update(Average *avg, const float *w, long t) {
    float rate = average_rate(avg->decay, t);
    float *a = avg->params;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < avg->num_params; i++) a[i] += rate * (w[i] - a[i]);
}

void average_swap(Average *avg, float *w) {
    float *a = avg->params;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < avg->num_params; i++) {
        float kept = w[i];
        w[i] = a[i];
        a[i] = kept;
    }
}
