#!/bin/sh
# bench_mpi.sh: on this machine, a training step of 2 processes x 1 thread
# against 1 process x 2 threads, for the default and the larger shape, and
# the gradient sum across 2 processes alone (bin-mpi/bench_reduce).
# Run from the repository root after `make MPI=1` (part of `make bench MPI=1`).
set -e
MPIRUN="mpirun --oversubscribe --allow-run-as-root"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ms_per_iter() { sed -n 's/.*(\([0-9.]*\) ms\/iter training).*/\1/p' "$1"; }
reduce_ms() { sed -n 's/^gradient sums across [0-9]* processes: \([0-9.]*\) ms\/iter/\1/p' "$1"; }
bench_shape() { # name, iterations, flags
    name=$1 iters=$2
    shift 2
    flags="$* --iters $iters --eval-every 1000000 --eval-batches 1 --sample-chars 0 --warmup 0"
    OMP_WAIT_POLICY=passive bin-mpi/train $flags --threads 2 --out "$dir/threads" --force >"$dir/threads.txt"
    $MPIRUN -np 2 --bind-to core -x OMP_WAIT_POLICY=passive bin-mpi/train $flags --threads 1 \
        --out "$dir/procs" --force >"$dir/procs.txt"
    echo "$name, $iters steps: 1 process x 2 threads $(ms_per_iter "$dir/threads.txt") ms/step;" \
         "2 processes x 1 thread $(ms_per_iter "$dir/procs.txt") ms/step," \
         "of which $(reduce_ms "$dir/procs.txt") ms summing gradients"
}
bench_shape "default 4L/4H/128 T64 B12" 100 --layers 4 --heads 4 --dim 128 --context 64 --batch 12
bench_shape "larger 6L/6H/384 T256 B8" 10 --layers 6 --heads 6 --dim 384 --context 256 --batch 8
$MPIRUN -np 2 bin-mpi/bench_reduce
