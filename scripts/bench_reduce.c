// bench_reduce.c: the time of summing one step's gradients across the
// processes of an MPI job, in rank order (what bin-mpi/train does, so that
// results do not depend on the process count) against MPI_Allreduce (order
// left to MPI), for the default and the larger model shape.
// Run: mpirun -np 2 bin-mpi/bench_reduce (part of `make bench MPI=1`).
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "../model/gpt.h"
#include "../train/distributed.h"

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median milliseconds of `reps` sums of n floats, by one of the two ways.
static double median_ms(int in_rank_order, float *grads, size_t n, float *chunk, int reps) {
    double *ms = malloc(reps * sizeof(double));
    for (int r = -2; r < reps; r++) { // two warm-up rounds
        for (size_t i = 0; i < n; i++) grads[i] = 1e-3f * (float)(i % 997);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (in_rank_order)
            distributed_sum_in_rank_order(grads, n, chunk);
        else
            distributed_sum_allreduce(grads, n);
        double t = 1e3 * (MPI_Wtime() - t0), slowest;
        MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 0) ms[r] = slowest;
    }
    qsort(ms, reps, sizeof(double), compare_doubles);
    double median = ms[reps / 2];
    free(ms);
    return median;
}

int main(void) {
    distributed_init();
    int procs = distributed_size();
    if (procs < 2 && distributed_rank() == 0) fprintf(stderr, "note: run under mpirun -np 2 or more\n");
    const struct {
        const char *name;
        GPTConfig cfg;
    } shapes[] = {{"default 4L/4H/128 (V65, T64)", {65, 64, 4, 4, 128}},
                  {"larger 6L/6H/384 (V65, T256)", {65, 256, 6, 6, 384}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t n = gpt_num_params(&shapes[s].cfg);
        float *grads = malloc(n * sizeof(float));
        float *chunk = malloc(distributed_scratch_floats(n) * sizeof(float));
        int reps = 30;
        double ordered = median_ms(1, grads, n, chunk, reps);
        double allreduce = median_ms(0, grads, n, chunk, reps);
        if (distributed_rank() == 0)
            printf("%s: %zu parameters (%.1f MB of gradients), %d processes: in rank order "
                   "%.2f ms, MPI_Allreduce %.2f ms (x%.2f)\n",
                   shapes[s].name, n, n * 4e-6, procs, ordered, allreduce, ordered / allreduce);
        free(grads);
        free(chunk);
    }
    return 0;
}
