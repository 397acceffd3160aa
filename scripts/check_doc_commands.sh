#!/usr/bin/env bash
# check_doc_commands.sh: does every command the README and docs/*.md show
# run as written, after the README's Quick start, on a fresh checkout?
#
#   scripts/check_doc_commands.sh [--lint] [--keep] [FILE.md ...]
#
#   FILE.md   the pages to check (default: README.md, then docs/*.md)
#   --lint    only read the pages: every block of commands is marked sh,
#             and every marker is well formed and stands before one
#   --keep    keep the scratch copies (their path is printed)
#
# What runs: each fenced block marked ```sh (```bash), in the page's order,
# with bash -e -o pipefail from the top of a scratch copy of this tree. A
# ```python block, or one without a language (output, a log), is not run;
# but a block without a language that holds a command (a line starting
# with ./bin/, bin/, make, mpirun, ...) is an error: mark it sh.
#
# An HTML comment on the line before the fence says how the test treats
# the block (the reader of the page sees nothing):
#   <!-- doc-test: skip REASON -->   shown, never run (an install, a macOS
#                                     step, a benchmark of many minutes)
#   <!-- doc-test: needs THING... --> run only where each THING is there: a
#                                     path that exists, or a command on PATH
#                                     (else skipped, and said)
#
# The scratch copy: the files git tracks here and the untracked ones it
# does not ignore, with this tree's bin/ and build/ (built first with
# `make all` when bin/train is missing; bin-mpi/ too when it is built),
# made a git repository of its own.
# The Quick start's commands (installing, make, ./bin/train) are the
# set-up, done by this script: the copy's bin/train trains the default
# model into out/. Each page then runs in its own copy of that state, as
# each page is written to be read after the Quick start.
#
# Shortened: in the copies, bin/train and bin/attn are wrappers around the
# programs that keep every flag as written except what sets the length of
# a run: --minutes M becomes --minutes 0.1 (the shortest budget), --iters N
# at most --iters 30 (30 when neither is given), --heatmaps-every N at most
# 10 (10 for a --recipe, whose own come later than step 30), --eval-batches
# at most 4, and bin/attn's --ablate-text-file averages
# over at most 12 windows. So a page's runs take seconds, and what is
# checked is that the commands, their flags and the files they pass to
# one another work. Open MPI is allowed to run as root
# (OMPI_ALLOW_RUN_AS_ROOT) for the MPI pages' mpirun lines.
#
# Last, the examples must write nowhere but under out/ or another ignored
# path: `git status` in each copy lists what a page left in the checkout.
#
# Exits 0 when every block ran (or was skipped as marked), 1 otherwise, 2
# when the check itself could not run. Takes about a minute on 2 cores.
set -u
export LC_ALL=C OMP_WAIT_POLICY=passive

usage() { sed -n '5,9s/^# \{0,1\}//p' "$0"; exit "$1"; }
die() { echo "check_doc_commands: $*" >&2; exit 2; }

lint_only=0 keep=0
pages=()
while [ $# -gt 0 ]; do
    case $1 in
    --lint) lint_only=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "check_doc_commands: unknown option $1" >&2; usage 2 ;;
    *) pages+=("$1"); shift ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || die "cannot enter $root"
[ ${#pages[@]} -gt 0 ] || pages=(README.md docs/*.md)

# ---- reading the pages

# blocks PAGE: one line per fenced block of commands, fields separated by
# \037: the line of its fence, its marker ("run", "skip REASON" or "needs
# THING..."), its text (lines joined by \036). Lint problems are printed
# as "PAGE:LINE: problem" on stderr and counted in the exit status.
blocks() {
    awk -v page="$1" '
    function problem(line, text) { printf "%s:%d: %s\n", page, line, text > "/dev/stderr"; bad++ }
    function looks_like_command(s) {
        return s ~ /^(\.\/bin\/|bin\/|bin-mpi\/|make( |$)|apt-get |mpirun |head -|tail -|git |scripts\/|\.\/scripts\/|sudo |dpkg |brew )/
    }
    BEGIN { in_block = 0; marker = ""; marker_line = 0; bad = 0 }
    {
        if (!in_block && $0 ~ /^```/) {
            info = substr($0, 4)
            in_block = 1; start = NR; text = ""; first = ""
            kind = (info == "sh" || info == "bash" || info == "shell") ? "sh" : (info == "" ? "plain" : "other")
            if (marker != "" && kind != "sh") problem(marker_line, "a doc-test marker before a block that is not sh")
            block_marker = marker; marker = ""
            next
        }
        if (in_block && $0 ~ /^```[ \t]*$/) {
            in_block = 0
            if (kind == "sh") {
                m = block_marker == "" ? "run" : block_marker
                printf "%d\037%s\037%s\n", start, m, text
            } else if (kind == "plain" && looks_like_command(first)) {
                problem(start, "a block of commands without a language: mark it ```sh (or skip it with a doc-test marker)")
            }
            next
        }
        if (in_block) {
            text = text (text == "" ? "" : "\036") $0
            if (first == "" && $0 !~ /^[ \t]*(#|$)/) first = $0
            next
        }
        if ($0 ~ /<!-- *doc-test:/) {
            if (match($0, /<!-- doc-test: (skip [^ ].*|needs [^ ].*) -->[ \t]*$/)) {
                marker = $0
                sub(/^.*<!-- doc-test: /, "", marker); sub(/ -->[ \t]*$/, "", marker)
                marker_line = NR
            } else {
                problem(NR, "a doc-test marker is <!-- doc-test: skip REASON --> or <!-- doc-test: needs THING... -->")
            }
            next
        }
        if (marker != "" && $0 !~ /^[ \t]*$/) { problem(marker_line, "a doc-test marker not directly before a fence"); marker = "" }
        if (marker != "" && $0 ~ /^[ \t]*$/) { problem(marker_line, "a doc-test marker must stand on the line before the fence"); marker = "" }
    }
    END {
        if (in_block) problem(start, "a fence that is never closed")
        exit bad > 0
    }' "$1"
}

lint_failed=0
for page in "${pages[@]}"; do
    [ -f "$page" ] || die "$page: no such page"
    blocks "$page" >/dev/null || lint_failed=1
done
if [ $lint_only = 1 ]; then
    [ $lint_failed = 0 ] && echo "check_doc_commands: ${#pages[@]} pages, every block of commands marked"
    exit $lint_failed
fi
[ $lint_failed = 0 ] || { echo "check_doc_commands: fix the markers above first" >&2; exit 1; }

# ---- the scratch copy after the Quick start

tmp=$(mktemp -d "${TMPDIR:-/tmp}/doc-commands.XXXXXX") || die "cannot make a scratch folder"
cleanup() { if [ $keep = 1 ]; then echo "scratch copies kept in $tmp"; else rm -rf "$tmp"; fi; }
trap cleanup EXIT

[ -x bin/train ] || make -j2 all >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; die "make all failed"; }
base=$tmp/after-quick-start
mkdir -p "$base"
{ git ls-files -z --cached --others --exclude-standard; printf 'bin\0build\0'
  [ ! -d bin-mpi ] || printf 'bin-mpi\0build-mpi\0'; } |
    tar --null -T - -cf - --ignore-failed-read 2>/dev/null | tar -xf - -C "$base" ||
    die "cannot copy the tree"
(cd "$base" && git init -q && git add -A && git -c user.name=doc -c user.email=doc@test commit -qm tree) ||
    die "cannot make the copy a repository"

# The wrappers: the programs as written, each run shortened (above).
for prog in train attn; do
    mv "$base/bin/$prog" "$base/bin/$prog.real" || die "no bin/$prog"
done
cat >"$base/bin/train" <<'EOF'
#!/usr/bin/env bash
# scripts/check_doc_commands.sh: bin/train with each run shortened
args=() timed=0 iters=0 batches=0 recipe=0 heatmaps=0
while [ $# -gt 0 ]; do
    case $1 in
    --recipe) args+=("$1" "${2:-}"); recipe=1; shift 2 ;;
    --minutes) args+=(--minutes 0.1); timed=1; shift 2 ;;
    --minutes=*) args+=(--minutes 0.1); timed=1; shift ;;
    --iters) n=${2:-30}; args+=(--iters $((n < 30 ? n : 30))); iters=1; shift 2 ;;
    --heatmaps-every) n=${2:-10}; args+=(--heatmaps-every $((n < 10 ? n : 10))); heatmaps=1; shift 2 ;;
    --eval-batches) n=${2:-4}; args+=(--eval-batches $((n < 4 ? n : 4))); batches=1; shift 2 ;;
    --resume) args+=("$1"); timed=1; shift ;;
    *) args+=("$1"); shift ;;
    esac
done
[ $timed = 1 ] || [ $iters = 1 ] || args+=(--iters 30)
[ $batches = 1 ] || args+=(--eval-batches 4)
[ $recipe = 0 ] || [ $heatmaps = 1 ] || args+=(--heatmaps-every 10)
exec "$(dirname "$0")/train.real" "${args[@]}"
EOF
cat >"$base/bin/attn" <<'EOF'
#!/usr/bin/env bash
# scripts/check_doc_commands.sh: bin/attn with --ablate-text-file shortened
extra=()
case " $* " in *" --ablate-text-file "*) case " $* " in *" --ablate-windows "*) ;; *) extra=(--ablate-windows 12) ;; esac ;; esac
exec "$(dirname "$0")/attn.real" "$@" "${extra[@]}"
EOF
chmod +x "$base/bin/train" "$base/bin/attn"
if [ -x "$base/bin-mpi/train" ]; then # the MPI build's trainer, shortened the same way
    mv "$base/bin-mpi/train" "$base/bin-mpi/train.real" && cp -p "$base/bin/train" "$base/bin-mpi/train"
fi
(cd "$base" && ./bin/train >"$tmp/quick-start.log" 2>&1) ||
    { tail -20 "$tmp/quick-start.log"; die "the Quick start's ./bin/train failed"; }

# ---- each page's blocks, in order

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ran=0 skipped=0 failed=0
for page in "${pages[@]}"; do
    work=$tmp/$(echo "$page" | tr '/' '_')
    cp -a "$base" "$work" || die "cannot copy the scratch tree"
    page_failed=0
    while IFS=$'\x1f' read -r line marker text; do
        block=${text//$'\x1e'/$'\n'}
        first=$(printf '%s\n' "$block" | grep -v '^[[:space:]]*\(#\|$\)' | head -1)
        case $marker in
        skip*)
            echo "skip $page:$line (${marker#skip }): $first"
            skipped=$((skipped + 1)); continue ;;
        needs*)
            missing=
            for thing in ${marker#needs }; do
                [ -e "$work/$thing" ] || [ -e "$thing" ] || command -v "$thing" >/dev/null 2>&1 ||
                    missing="$missing $thing"
            done
            if [ -n "$missing" ]; then
                echo "skip $page:$line (not here:$missing): $first"
                skipped=$((skipped + 1)); continue
            fi ;;
        esac
        [ $page_failed = 0 ] || { echo "skip $page:$line (a block before it failed): $first"; continue; }
        log=$tmp/log
        start=$EPOCHREALTIME
        (cd "$work" && bash -e -o pipefail -c "$block") >"$log" 2>&1 </dev/null
        status=$?
        seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
        if [ $status = 0 ]; then
            printf 'ok   %s:%s (%.1f s): %s\n' "$page" "$line" "$seconds" "$first"
            ran=$((ran + 1))
        else
            printf 'FAIL %s:%s (exit %d):\n%s\n--- its output, last lines:\n' "$page" "$line" "$status" "$block"
            tail -15 "$log"
            failed=$((failed + 1)) page_failed=1
        fi
    done < <(blocks "$page")
    left=$(cd "$work" && git status --porcelain --untracked-files=all | grep -v '^ M \(bin\|build\)/' )
    if [ -n "$left" ]; then
        echo "FAIL $page: its examples wrote into the checkout outside .gitignore (write under out/):"
        echo "$left" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
    [ $keep = 1 ] || rm -rf "$work"
done
echo "$ran blocks ran, $skipped skipped, $failed failed"
[ $failed = 0 ]
