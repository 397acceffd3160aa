#!/usr/bin/env bash
# check_identity.sh: do this tree's bin/train, bin/sample and bin/attn write,
# bit for bit, what a baseline commit's write? Builds both, runs the same
# commands with each and compares every output with cmp.
#
#   scripts/check_identity.sh [-d DIR] [--rebuild] [--keep] [COMMIT]
#
#   COMMIT     the baseline (default 2a919e4, the last commit before the
#              restructuring of the sources)
#   -d DIR     where the baseline's build and outputs are kept (default
#              ${TMPDIR:-/tmp}/identity-<commit hash>); a second run reuses
#              them and only builds and runs this tree
#   --rebuild  build and run the baseline again even when it is cached
#   --keep     keep this tree's outputs even when all are the same (they are
#              always kept when something differs; the path is printed)
#
# Prints one line per check, "same" or "DIFFERS" with what differed, then
# "N same, M differ"; exits 0 only when every check is the same (1 when
# something differs, 2 when the check itself could not run).
#
# Only the programs' command-line interface is used: their flags, their
# output files, the default corpus data/tinyshakespeare.txt, and the
# Makefile's targets bin/train bin/sample bin/attn; so this holds while the
# sources move. Every command runs in a scratch folder with relative paths,
# so paths written into the outputs (loss.png's title, the options saved in
# optimizer.safetensors) are the same on both sides.
set -u
export LC_ALL=C OMP_WAIT_POLICY=passive
unset GPT_UNIFONT

usage() { sed -n '6,15s/^# \{0,1\}//p' "$0"; exit "$1"; }
die() { echo "check_identity: $*" >&2; exit 2; }

base=2a919e4 cache= rebuild=0 keep=0
while [ $# -gt 0 ]; do
    case $1 in
    -d) cache=${2:?-d needs a folder}; shift 2 ;;
    --rebuild) rebuild=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "check_identity: unknown option $1" >&2; usage 2 ;;
    *) base=$1; shift ;;
    esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
hash=$(git -C "$root" rev-parse --verify --quiet "$base^{commit}") ||
    die "$base: not a commit of $root"
tmp=${TMPDIR:-/tmp}
cache=${cache:-$tmp/identity-$hash}

# Longer than the default context (64), so bin/attn also cuts it.
ATTN_TEXT='ROMEO:
But soft, what light through yonder window breaks?
It is the east, and Juliet is the sun.'

# ---- the checks, in the order they run (samples and heatmaps read the
# checkpoints trained before them). One list for three uses: $mode is plan
# (print the commands), run (run them in $side with $tree's programs) or
# compare (the baseline's outputs against this tree's).

# check KEY LABEL THREADS WHAT PROGRAM ARGS...: PROGRAM run with
# OMP_NUM_THREADS=THREADS; WHAT is "stdout" (compare what it prints) or
# "files" (compare every file of the folder KEY it writes).
check() {
    local key=$1 label=$2 threads=$3 what=$4 prog=$5
    shift 5
    case $mode in
    plan) echo "OMP_NUM_THREADS=$threads $prog $*" ;;
    run) run_one "$key" "$threads" "$prog" "$@" ;;
    compare) compare_one "$key" "$label" "$what" ;;
    esac
}

# sample KEY LABEL THREADS [FLAGS...]: bin/sample, 600 characters (the
# window slides past the 64-character context nine times), on the
# checkpoint of $prec's 2-thread run without dropout.
sample() {
    local key=$1 label=$2 threads=$3
    shift 3
    check "sample-$prec-$key" "sample $prec $label" "$threads" stdout \
        bin/sample --ckpt "train-$prec-t2-d0/model.safetensors" --precision "$prec" \
        --prompt ROMEO: --seed 1337 -n 600 --threads "$threads" --quiet "$@"
}

checks() {
    local prec threads dropout
    # 200 iterations, evaluated (4 batches a split) and snapshotted for the
    # atlas at 100 and 200, so log.csv has loss rows of both kinds.
    for prec in fp32 bf16; do
        for threads in 1 2; do
            for dropout in 0 0.1; do
                if [ "$dropout" = 0 ]; then set --; else set -- --dropout "$dropout"; fi
                check "train-$prec-t$threads-d$dropout" "train $prec threads=$threads dropout=$dropout" \
                    "$threads" files \
                    bin/train --out "train-$prec-t$threads-d$dropout" --iters 200 --threads "$threads" \
                    --precision "$prec" "$@" --eval-every 100 --eval-batches 4 --sample-chars 0 \
                    --heatmaps-every 100
            done
        done
    done
    for prec in fp32 bf16; do
        sample exact "exact" 1
        sample exact-t2 "exact threads=2" 2
        sample slide32 "slide=32" 1 --slide 32
        sample samples4 "samples=4" 1 --num-samples 4
        sample samples4-slide32 "samples=4 slide=32" 1 --num-samples 4 --slide 32
        sample topk-topp "top-k=10 top-p=0.9" 1 --top-k 10 --top-p 0.9
        # The explorer's slider reads the snapshots in train-$prec-t2-d0/attn.
        # The built-in font, so installing Unifont does not change the PNGs.
        check "attn-$prec" "attn $prec --html --raw" 2 files \
            bin/attn --ckpt "train-$prec-t2-d0/model.safetensors" --text-file attn-text.txt \
            --out "attn-$prec" --html --raw --font builtin --precision "$prec"
    done
}

# ---- running one side

# build TREE LOG: the three programs, as a plain make would.
build() {
    if ! make -C "$1" -j2 bin/train bin/sample bin/attn >"$2" 2>&1; then
        tail -n 20 "$2" >&2
        die "make failed in $1 (whole log: $2)"
    fi
}

# run_side TREE SIDE: every check with TREE's programs, outputs in SIDE.
# Each command's stdout, stderr and exit status go to SIDE/logs/KEY.*.
run_side() {
    tree=$1 side=$2
    mkdir -p "$side/data" "$side/logs" || die "cannot create $side"
    cp "$tree/data/tinyshakespeare.txt" "$side/data/" || die "$tree: no data/tinyshakespeare.txt"
    printf '%s\n' "$ATTN_TEXT" >"$side/attn-text.txt"
    mode=run checks
}

run_one() {
    local key=$1 threads=$2 prog=$3 start=$SECONDS
    shift 3
    (cd "$side" && OMP_NUM_THREADS=$threads "$tree/$prog" "$@" >"logs/$key.out" 2>"logs/$key.err")
    echo $? >"$side/logs/$key.rc"
    printf '  %4d s  %s %s\n' $((SECONDS - start)) "$prog" "$*" >&2
}

# ---- comparing

# losses LOG_CSV: log.csv without the columns that are wall-clock timings
# (ms_per_iter, tokens_per_s), which differ from run to run.
losses() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) keep[i] = $i !~ /^ms_|_ms$|per_s$|time|second|wall/ }
             { sep = ""; for (i = 1; i <= NF; i++) if (keep[i]) { printf "%s%s", sep, $i; sep = "," }
               print "" }' "$1"
}

# by_depth: the file names read, those at the top of the folder (log.csv,
# model.safetensors) before those in its subfolders, so they are named first.
by_depth() { awk -F/ '{ print NF "\t" $0 }' | sort -s -n -k1,1 | cut -f2-; }

files_in() { [ -d "$1" ] && (cd "$1" && find . -type f | sed 's|^\./||' | sort); }

compare_one() {
    local key=$1 label=$2 what=$3 a=$cache/out b=$cur
    local rc_a rc_b desc f n=0
    local -a differ=()
    rc_a=$(cat "$a/logs/$key.rc") rc_b=$(cat "$b/logs/$key.rc")
    [ "$rc_a" = "$rc_b" ] || differ+=("exit status $rc_b, baseline $rc_a (stderr: $b/logs/$key.err)")
    if [ "$what" = stdout ]; then
        desc="stdout ($(wc -c <"$a/logs/$key.out") bytes)"
        cmp -s "$a/logs/$key.out" "$b/logs/$key.out" || differ+=("stdout")
    else
        while IFS= read -r f; do differ+=("$f missing"); done < <(comm -23 <(files_in "$a/$key") <(files_in "$b/$key"))
        while IFS= read -r f; do differ+=("$f extra"); done < <(comm -13 <(files_in "$a/$key") <(files_in "$b/$key"))
        desc=
        while IFS= read -r f; do
            if [ "$f" = log.csv ]; then
                desc="log.csv losses, "
                cmp -s <(losses "$a/$key/$f") <(losses "$b/$key/$f") || differ+=("log.csv losses")
            else
                [ "$f" = model.safetensors ] && desc="${desc}model.safetensors, " || n=$((n + 1))
                cmp -s "$a/$key/$f" "$b/$key/$f" || differ+=("$f")
            fi
        done < <(comm -12 <(files_in "$a/$key") <(files_in "$b/$key") | by_depth)
        [ -n "$desc" ] && desc="$desc$n other files" || desc="$n files"
    fi
    if [ ${#differ[@]} -eq 0 ]; then
        printf 'same     %s: %s\n' "$label" "$desc"
        same=$((same + 1))
    else
        # at most 6 named, then how many more
        desc=$(printf '%s, ' "${differ[@]:0:6}")
        [ ${#differ[@]} -gt 6 ] && desc="$desc$((${#differ[@]} - 6)) more, "
        printf 'DIFFERS  %s: %s\n' "$label" "${desc%, }"
        differs=$((differs + 1))
    fi
}

# ---- the baseline: built and run once per commit, compiler and CPU
# (-march=native), and list of commands; then kept in $cache.

plan=$(mode=plan checks
       printf 'attn-text.txt: %s\n' "$ATTN_TEXT"
       gcc --version | head -n 1
       uname -m; grep -m 1 '^flags' /proc/cpuinfo | cksum)

partial= cur= drop_cur=0
trap '[ -n "$partial" ] && rm -rf "$partial"; [ "$drop_cur" = 1 ] && rm -rf "$cur"' EXIT
trap 'exit 2' INT TERM

t0=$SECONDS
if [ "$rebuild" = 1 ] || [ ! -d "$cache/out" ] || [ "$(cat "$cache/plan.txt" 2>/dev/null)" != "$plan" ]; then
    partial=$cache.partial.$$
    rm -rf "$partial"
    mkdir -p "$partial/src" || die "cannot create $partial"
    echo "baseline ${hash:0:7}: building in $partial/src" >&2
    git -C "$root" archive "$hash" | tar -x -C "$partial/src" || die "git archive $hash failed"
    build "$partial/src" "$partial/build.log"
    t_built=$SECONDS
    echo "baseline ${hash:0:7}: running" >&2
    run_side "$partial/src" "$partial/out"
    for rc in "$partial"/out/logs/*.rc; do
        [ "$(cat "$rc")" = 0 ] || die "the baseline's $(basename "$rc" .rc) failed: ${rc%.rc}.err"
    done
    printf '%s\n' "$plan" >"$partial/plan.txt"
    rm -rf "$cache" && mv "$partial" "$cache" || die "cannot move $partial to $cache"
    partial=
    baseline_note="built in $((t_built - t0)) s, ran in $((SECONDS - t_built)) s, cached in $cache"
else
    baseline_note="cached in $cache"
fi

# ---- this tree: built in place, outputs in a fresh folder

t1=$SECONDS
cur=$(mktemp -d "$tmp/identity-current.XXXXXX") || die "cannot create a folder in $tmp"
drop_cur=1
echo "current $root: building" >&2
build "$root" "$cur/build.log"
t_built=$SECONDS
echo "current $root: running" >&2
run_side "$root" "$cur"

echo "baseline ${hash:0:7}: $baseline_note"
echo "current $root: built in $((t_built - t1)) s, ran in $((SECONDS - t_built)) s; total $((SECONDS - t0)) s"
same=0 differs=0
mode=compare checks
if [ "$differs" -gt 0 ] || [ "$keep" = 1 ]; then
    drop_cur=0
    echo "this tree's outputs: $cur (the baseline's: $cache/out)"
fi
echo "$same same, $differs differ"
[ "$differs" -eq 0 ]
