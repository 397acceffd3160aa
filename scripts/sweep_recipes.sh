#!/bin/sh
# sweep_recipes.sh: rerun the sweep that chose bin/train's recipes
# (train/recipes.c): for a time budget, train each candidate for that many
# minutes on the same corpus and rank them by final validation loss.
#
#   scripts/sweep_recipes.sh MINUTES [CORPUS] [OUT]
#
# Runs one training at a time (so each gets the whole machine); prints a
# table of candidate -> iterations reached -> final validation loss, best
# first, and keeps every run's folder (log.csv, loss.png) under OUT
# (default sweep/MINUTES). Candidates are listed below per budget; add
# lines to try more. Every flag is explicit, so the recipe table itself
# does not take part.
set -eu
minutes=${1:?usage: scripts/sweep_recipes.sh MINUTES [CORPUS] [OUT]}
corpus=${2:-data/tinyshakespeare.txt}
out=${3:-sweep/$minutes}
common="--data $corpus --sample-chars 0 --minutes $minutes --force"

case $minutes in
1)  candidates='
--layers 4 --heads 4 --dim 128 --context 64 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 50 --dropout 0 --weight-decay 0.1
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 50 --dropout 0 --weight-decay 0.1
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 50 --dropout 0 --weight-decay 0.1' ;;
5)  candidates='
--layers 6 --heads 6 --dim 192 --context 128 --batch 16 --lr 1.5e-3 --min-lr 1.5e-4 --warmup 100 --dropout 0.1 --weight-decay 0.1
--layers 6 --heads 6 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0 --weight-decay 0.1
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0 --weight-decay 0.1
--layers 6 --heads 6 --dim 192 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0 --weight-decay 0.1
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0 --weight-decay 0.1
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0 --weight-decay 0.1' ;;
15) candidates='
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0.1 --weight-decay 0.1
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0 --weight-decay 0.1' ;;
*)  echo "no candidates for $minutes minutes (have 1, 5, 15)" >&2; exit 2 ;;
esac

mkdir -p "$out"
results="$out/results.txt"
: > "$results"
i=0
echo "$candidates" | while read -r flags; do
    [ -n "$flags" ] || continue
    i=$((i + 1))
    run="$out/$i"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    bin/train $common $flags --out "$run" > "$run.txt" 2>&1 || true
    end=$(date +%s.%N)
    val=$(sed -n 's/.*final val loss \([0-9.]*\).*/\1/p' "$run.txt")
    iters=$(sed -n 's/^done: \([0-9]*\) iterations.*/\1/p' "$run.txt")
    wall=$(awk "BEGIN { print $end - $start }")
    printf '%s\t%s\t%.0f s\t%s\n' "${val:-?}" "${iters:-?}" "$wall" "$flags" | tee -a "$results"
done
echo "--- best first: val loss, iterations, wall time, flags"
sort -n "$results"
