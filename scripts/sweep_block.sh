#!/bin/sh
# sweep_block.sh: the block's choices (--norm, --pos, --mlp, --qk-norm,
# --untie, --softcap, --smear, --key-offset, --value-embed, --zero-init-proj)
# each alone and together, against GPT-2's block, at a fixed number of
# steps of a recipe's schedule, so that every figure is reproducible bit
# for bit whatever the machine's load.
#
#   scripts/sweep_block.sh STEPS [CORPUS] [OUT] [SEED]
#   RECIPE="--layers 4 ... --muon-lr 0.02" scripts/sweep_block.sh 3754
#   VARIANTS="base all" scripts/sweep_block.sh 3754     (a subset, by name)
#
# RECIPE defaults to the 5- and 15-minute recipe on small texts
# (train/recipes.c). Prints one line per variant: its name, its final
# validation loss (over --eval-batches 50), the lowest one seen at the
# evaluations (every STEPS/8) and the training loss at the end; keeps each
# run's folder under OUT (default sweep/block-STEPS).
set -eu
steps=${1:?usage: scripts/sweep_block.sh STEPS [CORPUS] [OUT] [SEED]}
corpus=${2:-data/tinyshakespeare.txt}
out=${3:-sweep/block-$steps}
seed=${4:-1337}
recipe=${RECIPE:---layers 4 --heads 4 --dim 128 --context 128 --batch 16 --lr 3e-3 --min-lr 3e-5 --warmup 100 --dropout 0 --weight-decay 0.1 --optimizer muon --muon-lr 0.02}
every=$((steps / 8))
[ "$every" -ge 1 ] || every=1

variant() {
    case $1 in
    base) echo "" ;;
    rmsnorm) echo "--norm rmsnorm" ;;
    rope) echo "--pos rope" ;;
    relu2) echo "--mlp relu2" ;;
    swiglu) echo "--mlp swiglu --dim 132 --heads 4" ;;
    qknorm) echo "--qk-norm" ;;
    untie) echo "--untie" ;;
    softcap) echo "--softcap 15" ;;
    zeroinit) echo "--zero-init-proj" ;;
    modern) echo "--norm rmsnorm --pos rope --mlp relu2 --qk-norm --softcap 15 --zero-init-proj" ;;
    all) echo "--norm rmsnorm --pos rope --mlp relu2 --qk-norm --untie --softcap 15 --zero-init-proj" ;;
    untie_rope) echo "--pos rope --untie" ;;
    untie_rope_rms) echo "--norm rmsnorm --pos rope --untie" ;;
    untie_rope_drop) echo "--pos rope --untie --dropout 0.05" ;;
    rope_smear) echo "--pos rope --smear" ;;
    rope_keyoff) echo "--pos rope --key-offset" ;;
    rope_vembed) echo "--pos rope --value-embed" ;;
    rope_smear_keyoff) echo "--pos rope --smear --key-offset" ;;
    rope_smear_keyoff_vembed) echo "--pos rope --smear --key-offset --value-embed" ;;
    *) echo "sweep_block.sh: unknown variant $1" >&2; exit 2 ;;
    esac
}

mkdir -p "$out"
for name in ${VARIANTS:-base rmsnorm rope relu2 swiglu qknorm untie softcap zeroinit modern all}; do
    flags=$(variant "$name")
    dir=$out/$name
    # shellcheck disable=SC2086 # the flags are words
    ./bin/train $recipe $flags --iters "$steps" --eval-every "$every" --eval-batches 50 \
        --sample-chars 0 --seed "$seed" --data "$corpus" --out "$dir" --force >"$dir.log" 2>&1 ||
        { echo "$name: failed (see $dir.log)"; continue; }
    # log.csv: step,...; the val column by name, the last and the lowest
    awk -F, -v name="$name" 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "val_loss") v = i; if ($i == "train_loss") t = i }; next }
         v && $v != "" { last = $v; if (best == "" || $v < best) best = $v; train = $t }
         END { printf "%-10s val %s  best %s  train %s\n", name, last, best, train }' "$dir/log.csv"
done
