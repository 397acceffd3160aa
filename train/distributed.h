// distributed.h: the processes of a data-parallel run (MPI, built with
// `make MPI=1`; without it one process and these calls do nothing): who we
// are, agreeing at start-up, sharing rank 0's state, and summing gradients
// in a fixed order so that R processes reproduce one process bit for bit.
#ifndef DISTRIBUTED_H
#define DISTRIBUTED_H

#include <stddef.h>
#include <stdint.h>

// Whether this binary was built with MPI.
extern const int distributed_built_with_mpi;

// Start MPI if the program was launched by mpirun (else one process, no MPI
// at all). From here until distributed_started, a fatal error on any rank
// (die, usage_error, exit) is agreed on at the next distributed_agree: every
// process exits with the first failing rank's code, rank 0 printing its
// message once. Ranks other than 0 have their stdout sent to /dev/null.
void distributed_init(void);
int distributed_rank(void);
int distributed_size(void);

// A start-up checkpoint: every process passes here (or fails on its way);
// the processes compare `fingerprint` (a hash of what must be the same on
// all: flags, corpus, binary) and stop together, with one message, if any
// failed or any differs from rank 0's. `what` names it in that message.
void distributed_agree(const char *what, uint64_t fingerprint);
// Start-up is over: from now on a fatal error on any rank prints its
// message (naming the rank) and ends the whole job (MPI_Abort).
void distributed_started(void);

// Copy rank 0's bytes to every process.
void distributed_broadcast(void *data, size_t bytes);

// data[i] = data_0[i] + data_1[i] + ... + data_{R-1}[i], added left to right
// in rank order, the same bits on every process whatever MPI's algorithms:
// each rank gathers one R-th of the buffer from all (an all-to-all), adds
// the R copies itself in rank order, and all gather the sums back.
// `scratch` holds distributed_scratch_floats(n) floats.
void distributed_sum_in_rank_order(float *data, size_t n, float *scratch);
size_t distributed_scratch_floats(size_t n);
// The same sum by MPI_Allreduce (its order is MPI's choice), to compare costs.
void distributed_sum_allreduce(float *data, size_t n);
// Sum of values each held by one process (zero on the others): exact in any
// order, so MPI_Allreduce is fine.
void distributed_sum_disjoint(double *data, size_t n);

// FNV-1a of bytes, continuing from h (start with DISTRIBUTED_HASH_START).
#define DISTRIBUTED_HASH_START 0xcbf29ce484222325ull
uint64_t distributed_hash(uint64_t h, const void *bytes, size_t len);
// A hash of this program's own executable file: different builds differ.
uint64_t distributed_build_id(void);

#endif
