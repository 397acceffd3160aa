#!/bin/sh
# bench_page.sh [CKPT [TEXT_CHARS]]: the page's speed in each browser here,
# for bin/explore's page of CKPT (default out/model.safetensors): its size,
# the time it takes to open (until the model has run once), the forward
# alone over the first TEXT_CHARS (default 64) characters of the Shakespeare
# text (the median of 21), and a sampled character (the mean of 200, from
# that text: every step a whole-window forward once the window is full, as
# bin/sample's exact mode). Needs bin/explore, node and puppeteer-core in
# build-node/ (.ci/run); Chromium and Firefox ESR where installed.
set -eu
cd "$(dirname "$0")/.."
ckpt=${1:-out/model.safetensors}
chars=${2:-64}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin/explore --ckpt "$ckpt" --out "$tmp/page.html" --max-snapshots 0 >/dev/null
text=$(head -c "$chars" data/tinyshakespeare.txt | tr -d "'")
size=$(wc -c <"$tmp/page.html")
echo "$ckpt: page $(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1e6 }') MB; $(awk -F': ' '/^model name/ { n = $2 } /^cpu family/ { f = $2 } /^model\t/ { m = $2 } END { print n " (family " f ", model " m ")" }' /proc/cpuinfo)"
for browser in chromium firefox; do
    case $browser in chromium) exe=/usr/bin/chromium ;; firefox) exe=/usr/bin/firefox-esr ;; esac
    [ -x "$exe" ] || { echo "$browser: not installed"; continue; }
    node tests/page_driver.mjs --browser "$browser" --page "$tmp/page.html" --text "$text" --paste --time \
        >"$tmp/$browser.json"
    node -e '
        const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
        if (d.error) { console.log(process.argv[2] + ": " + d.error); process.exit(1); }
        console.log(process.argv[2] + ": opens in " + d.openMs + " ms; forward over " + d.n +
                    " characters " + d.forwardMs.toFixed(1) + " ms; a sampled character " +
                    d.sampleMs.toFixed(2) + " ms");' "$tmp/$browser.json" "$browser ($("$exe" --version 2>/dev/null | head -1))"
done
