#!/bin/sh
# sweep_recipes.sh: rerun the sweep that chose bin/train's recipes
# (train/recipes.c): for a time budget, train each candidate for that many
# minutes on the same corpus and rank them by final validation loss; then
# rerun the best few with more seeds and rank those by their mean.
#
#   scripts/sweep_recipes.sh MINUTES [CORPUS] [OUT]
#   FINALISTS=2 SEEDS="1 2" scripts/sweep_recipes.sh 5     (the defaults)
#
# Runs one training at a time (so each gets the whole machine); prints a
# table of candidate -> iterations reached -> final validation loss, best
# first, and keeps every run's folder (log.csv, loss.png) under OUT
# (default sweep/MINUTES). Candidates are listed below per budget; they
# vary the optimizer, schedule, shape, context, batch, learning rates,
# dropout and weight decay around the recipe in use; add lines to try
# more. Every flag is explicit, so the recipe table itself does not take
# part. The seed of the first round is bin/train's default (1337).
set -eu
minutes=${1:?usage: scripts/sweep_recipes.sh MINUTES [CORPUS] [OUT]}
corpus=${2:-data/tinyshakespeare.txt}
out=${3:-sweep/$minutes}
finalists=${FINALISTS:-2}
seeds=${SEEDS:-1 2}
common="--data $corpus --sample-chars 0 --minutes $minutes --force"

case $minutes in
1)  candidates='
--layers 4 --heads 4 --dim 128 --context 64 --batch 16 --lr 2e-3 --min-lr 2e-5 --warmup 50 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 64 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 50 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 64 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 50 --dropout 0 --weight-decay 0.1 --optimizer adamw
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 50 --dropout 0 --weight-decay 0.1 --optimizer adamw
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 50 --dropout 0 --weight-decay 0.1 --optimizer adamw' ;;
5)  candidates='
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-5 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 0 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.03
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02 --schedule wsd
--layers 4 --heads 4 --dim 128 --context 128 --batch 24 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-5 --warmup 100 --dropout 0 --weight-decay 0.1 --beta2 0.95 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer adamw
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer adamw
--layers 6 --heads 6 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer adamw' ;;
15) candidates='
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-5 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-5 --warmup 100 --dropout 0.05 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 160 --context 128 --batch 16 --lr 2.5e-3 --min-lr 2.5e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0.05 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0.1 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0.1 --weight-decay 0.1 --optimizer adamw
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer adamw' ;;
60) candidates='
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-5 --warmup 100 --dropout 0.1 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0.1 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0.2 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0.15 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 6 --heads 6 --dim 192 --context 128 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 100 --dropout 0.1 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-4 --warmup 100 --dropout 0.1 --weight-decay 0.1 --optimizer muon --muon-lr 0.02
--layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-5 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02' ;;
*)  echo "no candidates for $minutes minutes (have 1, 5, 15, 60)" >&2; exit 2 ;;
esac

# one run: its final validation loss, iterations and wall time, a tab-separated row
train_one() { # RUN FLAGS...
    run=$1
    shift
    start=$(date +%s.%N)
    # shellcheck disable=SC2086 # $common: several flags
    bin/train $common "$@" --out "$run" > "$run.txt" 2>&1 || true
    end=$(date +%s.%N)
    val=$(sed -n 's/.*final val loss \([0-9.]*\).*/\1/p' "$run.txt")
    iters=$(sed -n 's/^done: \([0-9]*\) iterations.*/\1/p' "$run.txt")
    wall=$(awk "BEGIN { print $end - $start }")
    printf '%s\t%s\t%.0f s\t%s\n' "${val:-?}" "${iters:-?}" "$wall" "$*"
}

mkdir -p "$out"
results="$out/results.txt"
: > "$results"
i=0
echo "$candidates" | while read -r flags; do
    [ -n "$flags" ] || continue
    i=$((i + 1))
    # shellcheck disable=SC2086
    train_one "$out/$i" $flags | tee -a "$results"
done
echo "--- best first: val loss, iterations, wall time, flags"
sort -n "$results"

# the finalists again with each of SEEDS; ranked by the mean of all their seeds
finals="$out/finalists.txt"
: > "$finals"
k=0
sort -n "$results" | head -n "$finalists" | cut -f4 | while read -r flags; do
    first=$(grep -F "	$flags" "$results" | head -n 1 | cut -f1)
    losses=$first
    for seed in $seeds; do
        k=$((k + 1))
        # shellcheck disable=SC2086
        row=$(train_one "$out/seed$seed-$k" $flags --seed "$seed")
        echo "$row"
        losses="$losses $(echo "$row" | cut -f1)"
    done
    mean=$(echo "$losses" | awk '{ s = 0; for (k = 1; k <= NF; k++) s += $k; printf "%.4f", s / NF }')
    printf '%s\t%s\t%s\n' "$mean" "$losses" "$flags" >> "$finals"
done
echo "--- finalists, best first: mean val loss over seeds 1337 $seeds, each seed's, flags"
sort -n "$finals"
