#!/bin/sh
# embed.sh OUT.c NAME FILE [NAME FILE ...]: a C file defining, for each pair,
# `const unsigned char NAME[]` (the file's bytes, then a 0, so that text can
# be read as a string) and `const unsigned long NAME_len` (the bytes
# without that 0). POSIX od and sed only.
set -eu
out=$1
shift
tmp=$out.tmp.$$
{
    echo '// Made by page/embed.sh from the files named below; do not edit.'
    while [ $# -ge 2 ]; do
        name=$1 file=$2
        shift 2
        echo "// $file"
        echo "const unsigned char $name[] = {"
        od -An -v -tu1 "$file" | sed -e 's/^ *//' -e 's/  */,/g' -e 's/$/,/' -e '/^,$/d'
        echo '0};'
        echo "const unsigned long ${name}_len = $(wc -c <"$file");"
    done
} >"$tmp"
mv "$tmp" "$out"
