// distributed.c: the processes of a data-parallel run over MPI (compiled
// with -DUSE_MPI by `make MPI=1`), or one process without it (the stubs at
// the end). See distributed.h.
#include "distributed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

uint64_t distributed_hash(uint64_t h, const void *bytes, size_t len) {
    const unsigned char *b = bytes;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint64_t distributed_build_id(void) {
    size_t len;
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f) return 0;
    unsigned char buffer[65536];
    uint64_t h = DISTRIBUTED_HASH_START;
    while ((len = fread(buffer, 1, sizeof buffer, f)) > 0) h = distributed_hash(h, buffer, len);
    fclose(f);
    return h;
}

// Launched by mpirun (Open MPI, or a PMI launcher such as MPICH's)?
static int launched_by_mpirun(int *world_size) {
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (getenv(names[i])) {
            *world_size = atoi(getenv(names[i]));
            return 1;
        }
    *world_size = 1;
    return 0;
}

#ifdef USE_MPI
#include <mpi.h>
#include <unistd.h>

const int distributed_built_with_mpi = 1;

static int my_rank, world_size = 1, mpi_running, start_up_over, finalized;
static int next_phase; // start-up checkpoints passed so far

static void finalize(void) {
    if (mpi_running && !finalized) {
        finalized = 1;
        MPI_Finalize();
    }
}

// One process's word at a start-up checkpoint.
enum { AGREE_OK, AGREE_FAILED, AGREE_EXITED };
typedef struct {
    int32_t phase, status, exit_code, unused;
    uint64_t fingerprint;
    char host[64];
    char message[2048];
} Agreement;

// Every process's word to every process; returns 1 when all are fine and
// agree; otherwise rank 0 prints the one message and *exit_code is set.
static int exchange(Agreement *mine, const char *what, int *exit_code) {
    gethostname(mine->host, sizeof mine->host - 1);
    Agreement *all = xcalloc((size_t)world_size, sizeof(Agreement));
    MPI_Allgather(mine, sizeof *mine, MPI_BYTE, all, sizeof *mine, MPI_BYTE, MPI_COMM_WORLD);
    next_phase++;
    char message[2400] = "";
    int failed = -1, exited = -1, differs = -1;
    for (int r = world_size - 1; r >= 0; r--) {
        if (all[r].status == AGREE_FAILED) failed = r;
        if (all[r].status == AGREE_EXITED) exited = r;
        if (all[r].phase != all[0].phase || all[r].fingerprint != all[0].fingerprint) differs = r;
    }
    *exit_code = 0;
    if (failed >= 0) {
        const Agreement *a = &all[failed];
        *exit_code = a->exit_code;
        if (failed == 0 || (all[0].status == AGREE_FAILED && !strcmp(all[0].message, a->message)))
            snprintf(message, sizeof message, "error: %s", all[0].message);
        else
            snprintf(message, sizeof message, "error: rank %d (%s): %s", failed, a->host, a->message);
    } else if (exited >= 0) {
        int all_exited = 1;
        for (int r = 0; r < world_size; r++) all_exited &= all[r].status == AGREE_EXITED;
        if (!all_exited) {
            *exit_code = 1;
            snprintf(message, sizeof message,
                     "error: rank %d (%s) exited during start-up while others went on (were they "
                     "given different flags?)",
                     exited, all[exited].host);
        }
    } else if (differs >= 0) {
        *exit_code = 1;
        snprintf(message, sizeof message,
                 "error: rank %d (%s) disagrees with rank 0 (%s) on %s: every process must run the "
                 "same bin/train build with the same flags and the same corpus",
                 differs, all[differs].host, all[0].host, what);
    }
    free(all);
    if (*exit_code == 0 && failed < 0 && exited < 0) return 1;
    if (my_rank == 0 && message[0]) {
        fflush(stdout);
        fprintf(stderr, "%s\n", message);
    }
    return 0;
}

static void on_fatal(int exit_code, const char *message) {
    fflush(stdout);
    if (!start_up_over) {
        // Meet the others at their next checkpoint, so that all stop together.
        Agreement mine = {.phase = next_phase, .status = AGREE_FAILED, .exit_code = exit_code};
        snprintf(mine.message, sizeof mine.message, "%s", message);
        int code;
        exchange(&mine, "", &code);
        finalize();
        exit(code);
    }
    if (my_rank == 0)
        fprintf(stderr, "error: %s\n", message);
    else
        fprintf(stderr, "error: rank %d: %s\n", my_rank, message);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    exit(exit_code);
}

// exit() during start-up (--help): tell the others, who are at a checkpoint too.
static void on_exit_during_start_up(void) {
    if (!mpi_running || finalized) return;
    if (!start_up_over) {
        Agreement mine = {.phase = next_phase, .status = AGREE_EXITED};
        int code;
        exchange(&mine, "", &code);
    }
    finalize();
}

void distributed_init(void) {
    int launched_size;
    if (!launched_by_mpirun(&launched_size)) return;
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    mpi_running = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    set_fatal_hook(on_fatal);
    atexit(on_exit_during_start_up);
    if (my_rank != 0 && !freopen("/dev/null", "w", stdout)) die("cannot redirect stdout");
}

int distributed_rank(void) { return my_rank; }
int distributed_size(void) { return world_size; }

void distributed_agree(const char *what, uint64_t fingerprint) {
    if (!mpi_running) return;
    Agreement mine = {.phase = next_phase, .status = AGREE_OK, .fingerprint = fingerprint};
    int code;
    if (exchange(&mine, what, &code)) return;
    finalize();
    exit(code);
}

void distributed_started(void) { start_up_over = 1; }

void distributed_broadcast(void *data, size_t bytes) {
    if (world_size == 1) return;
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < (1u << 30) ? bytes - done : (1u << 30);
        MPI_Bcast((char *)data + done, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
        done += n;
    }
}

size_t distributed_scratch_floats(size_t n) {
    size_t part = (n + world_size - 1) / world_size;
    return part * world_size;
}

void distributed_sum_in_rank_order(float *data, size_t n, float *scratch) {
    if (world_size == 1) return;
    // Rank k owns part k of the buffer: every rank sends it its part k
    // (MPI_Alltoallv), the owner adds the R copies in rank order, and every
    // rank gathers every part back (MPI_Allgatherv). Each rank sends and
    // receives 2(R-1)/R of the buffer, as a ring all-reduce does.
    size_t part = (n + world_size - 1) / world_size;
    int *counts = xcalloc((size_t)world_size * 4, sizeof(int));
    int *displs = counts + world_size, *recv_counts = displs + world_size,
        *recv_displs = recv_counts + world_size;
    for (int k = 0; k < world_size; k++) {
        size_t begin = (size_t)k * part < n ? (size_t)k * part : n;
        size_t end = begin + part < n ? begin + part : n;
        counts[k] = (int)(end - begin);
        displs[k] = (int)begin;
    }
    int mine = counts[my_rank];
    for (int k = 0; k < world_size; k++) {
        recv_counts[k] = mine;
        recv_displs[k] = k * mine;
    }
    MPI_Alltoallv(data, counts, displs, MPI_FLOAT, scratch, recv_counts, recv_displs, MPI_FLOAT,
                  MPI_COMM_WORLD);
    float *own = data + displs[my_rank];
#pragma omp parallel for schedule(static)
    for (int i = 0; i < mine; i++) {
        float sum = scratch[i];
        for (int k = 1; k < world_size; k++) sum = sum + scratch[(size_t)k * mine + i];
        own[i] = sum;
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts, displs, MPI_FLOAT,
                   MPI_COMM_WORLD);
    free(counts);
}

void distributed_sum_allreduce(float *data, size_t n) {
    if (world_size == 1) return;
    for (size_t begin = 0; begin < n; begin += (1u << 28)) {
        size_t count = n - begin < (1u << 28) ? n - begin : (1u << 28);
        MPI_Allreduce(MPI_IN_PLACE, data + begin, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
}

void distributed_sum_disjoint(double *data, size_t n) {
    if (world_size == 1) return;
    MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

#else // ---- one process: no MPI

const int distributed_built_with_mpi = 0;

void distributed_init(void) {
    int launched_size;
    if (launched_by_mpirun(&launched_size) && launched_size > 1)
        die("this bin/train was built without MPI, so %d copies would each train alone: build "
            "with `make MPI=1` and run bin-mpi/train under mpirun",
            launched_size);
}
int distributed_rank(void) { return 0; }
int distributed_size(void) { return 1; }
void distributed_agree(const char *what, uint64_t fingerprint) { (void)what, (void)fingerprint; }
void distributed_started(void) {}
void distributed_broadcast(void *data, size_t bytes) { (void)data, (void)bytes; }
size_t distributed_scratch_floats(size_t n) { return n; }
void distributed_sum_in_rank_order(float *data, size_t n, float *scratch) {
    (void)data, (void)n, (void)scratch;
}
void distributed_sum_allreduce(float *data, size_t n) { (void)data, (void)n; }
void distributed_sum_disjoint(double *data, size_t n) { (void)data, (void)n; }

#endif
