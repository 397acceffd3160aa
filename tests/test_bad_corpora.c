// test_bad_corpora.c: corpora bin/train must refuse (missing, empty, a
// folder, a FIFO, binary, invalid UTF-8, too many characters, too short)
// with one line naming the file and the problem; the extremes it must take
// (65535 distinct characters, one character repeated); and what loading a
// large corpus costs in memory.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../data/dataset.h"
#include "check.h"
#include "fixtures.h"

static size_t put_utf8(unsigned char *out, uint32_t code_point) {
    return (size_t)utf8_encode(code_point, (char *)out);
}

// n distinct code points from U+0001 up, skipping the surrogates.
static unsigned char *distinct_code_points(int n, size_t *len) {
    unsigned char *text = xmalloc((size_t)n * 4);
    *len = 0;
    uint32_t cp = 1;
    for (int i = 0; i < n; i++, cp++) {
        if (cp == 0xD800) cp = 0xE000;
        *len += put_utf8(text + *len, cp);
    }
    return text;
}

// The first bytes of an executable (ELF, 64-bit, little-endian): a NUL at
// byte 7, before the first byte that is not UTF-8 (24).
static const unsigned char elf_header[40] = {
    0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0x3e, 0, 1, 0, 0, 0,
    0xf0, 0x5c, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0};

static void test_bad_corpora(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *fifo = keep_path(path_in(dir, "fifo"));
    CHECK(mkfifo(fifo, 0644) == 0);
    write_file_bytes(path_in(dir, "empty.txt"), "", 0);
    write_file_bytes(path_in(dir, "nul.txt"), "hello\0world, hello world, hello world", 38);
    write_file_bytes(path_in(dir, "latin1.txt"), "caf\xe9 au lait, caf\xe9 au lait, caf\xe9 au lait", 40);
    write_file_bytes(path_in(dir, "cut.txt"), "a long enough text, a long enough text \xe2\x82", 41);
    write_file_bytes(path_in(dir, "surrogate.txt"), "text text text text text \xed\xa0\x80 text", 33);
    size_t len;
    unsigned char *many = distinct_code_points(65536, &len);
    write_file_bytes(path_in(dir, "many.txt"), many, len);
    free(many);
    // the training split is long enough, the validation split is not
    char text[201];
    memset(text, 'a', 200);
    for (int i = 0; i < 200; i += 7) text[i] = 'b';
    write_file_bytes(path_in(dir, "short_val.txt"), text, 200);
    write_file_bytes(path_in(dir, "elf"), elf_header, sizeof elf_header);
    mkdir(path_in(dir, "folder"), 0755);
    struct {
        const char *name, *message;
    } cases[] = {
        {"missing.txt", "missing.txt: No such file or directory"},
        {"empty.txt", "empty.txt: empty corpus"},
        {"folder", "folder: is a directory"},
        {"fifo", "fifo: not a regular file"},
        {"nul.txt", "nul.txt: NUL byte at offset 5 (a binary file, not text?)"},
        {"latin1.txt", "latin1.txt: invalid UTF-8 at byte offset 3 (lead byte not followed by continuation bytes)"},
        {"cut.txt", "cut.txt: invalid UTF-8 at byte offset 39 (sequence truncated by the end of the text)"},
        {"surrogate.txt", "surrogate.txt: invalid UTF-8 at byte offset 25 (UTF-16 surrogate)"},
        {"elf", "elf: NUL byte at offset 7 (a binary file, not text?)"},
        {"many.txt", "many.txt: 65536 distinct characters, more than the limit of 65535 (token ids are uint16_t)"},
        {"short_val.txt", "need at least 33 (context 32 + 1)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --context 32 --data %s --out %s/run",
                         path_in(dir, cases[i].name), dir);
        char *out = output_of(capture);
        CHECK_MSG(status == 1 && strstr(out, cases[i].message) && count_lines(out) == 1,
                  "'%s' exited %d:\n%s", cases[i].name, status, out);
        free(out);
    }
    // bin/sample on a FIFO: refused, not blocked waiting for a writer
    int status = RUN(capture, NULL, "bin/sample --ckpt %s -n 1", fifo);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "fifo: not a regular file"), "exited %d:\n%s", status, out);
    free(out);
}

// Exactly 65535 distinct characters: the largest vocabulary; trains, saves,
// loads and samples.
static void test_largest_vocabulary(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *corpus = keep_path(path_in(dir, "many.txt"));
    size_t len;
    unsigned char *many = distinct_code_points(65535, &len);
    write_file_bytes(corpus, many, len);
    free(many);
    Corpus c;
    char err[512];
    CHECK_MSG(corpus_load(&c, corpus, 0.5, err, sizeof err), "%s", err);
    CHECK(c.vocab.size == 65535 && c.num_tokens == 65535);
    CHECK(c.tokens[0] == 0 && c.tokens[65534] == 65534);
    corpus_free(&c);
    int status = RUN(capture, NULL, "bin/train --layers 1 --heads 1 --dim 4 --context 4 --batch 1 "
                                    "--eval-batches 1 --sample-chars 5 --threads 1 --iters 2 "
                                    "--val-fraction 0.5 --data %s --out %s/run",
                     corpus, dir);
    char *text = output_of(capture);
    CHECK_MSG(status == 0 && strstr(text, "vocabulary 65535"), "exited %d:\n%s", status, text);
    free(text);
    CHECK(RUN(NULL, NULL, "bin/sample --ckpt %s/run/model.safetensors -n 3", dir) == 0);
}

// A corpus of one character repeated: vocabulary 1, nothing divides by
// zero, the loss is 0 from the start, and sampling repeats the character.
static void test_single_character_corpus(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *corpus = keep_path(path_in(dir, "a.txt"));
    char text[3000];
    memset(text, 'a', sizeof text);
    write_file_bytes(corpus, text, sizeof text);
    int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 10 --eval-every 5 --sample-chars 10 "
                                    "--data %s --out %s/run",
                     corpus, dir);
    char *out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "vocabulary 1;") &&
                  strstr(out, "final val loss 0.0000") && strstr(out, "aaaaaaaaaa"),
              "exited %d:\n%s", status, out);
    free(out);
    status = RUN(capture, NULL, "bin/sample --ckpt %s/run/model.safetensors -n 20 --quiet", dir);
    out = output_of(capture);
    CHECK_MSG(status == 0 && !strcmp(out, "aaaaaaaaaaaaaaaaaaaa\n"), "exited %d: '%s'", status, out);
    free(out);
}

// kB of VmHWM (peak resident memory) in /proc/self/status, or -1.
static long peak_rss_kb(void) {
    char *status = read_text_file("/proc/self/status");
    const char *line = status ? strstr(status, "VmHWM:") : NULL;
    long kb = line ? atol(line + strlen("VmHWM:")) : -1;
    free(status);
    return kb;
}

// A 48 MB corpus costs its token array (2 bytes per character) and the
// mapped file, not several copies. Measured in a child, whose peak starts
// at its size when it is forked.
static void test_corpus_load_memory(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(path_in(dir, "big.txt"));
    const size_t chunk = 1 << 20, chunks = 48;
    char *block = xmalloc(chunk);
    size_t len = 0;
    unsigned char *sample = read_file_bytes("data/tinyshakespeare.txt", &len);
    for (size_t i = 0; i < chunk; i++) block[i] = sample && len ? (char)sample[i % len] : "ab\n"[i % 3];
    free(sample);
    FILE *f = fopen(corpus, "wb");
    CHECK(f != NULL);
    if (!f) return;
    for (size_t i = 0; i < chunks; i++) fwrite(block, 1, chunk, f);
    fclose(f);
    free(block);
    size_t file_bytes = chunk * chunks; // ASCII: one token per byte
    int pipe_fds[2];
    CHECK(pipe(pipe_fds) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipe_fds[0]);
        long before = peak_rss_kb();
        Corpus c;
        char err[512];
        long result[3] = {before, -1, -1};
        if (corpus_load(&c, corpus, 0.1, err, sizeof err)) {
            result[1] = peak_rss_kb();
            result[2] = (long)c.num_tokens;
            corpus_free(&c);
        }
        if (write(pipe_fds[1], result, sizeof result) != sizeof result) _exit(1);
        _exit(0);
    }
    close(pipe_fds[1]);
    long result[3] = {-1, -1, -1};
    CHECK(read(pipe_fds[0], result, sizeof result) == sizeof result);
    close(pipe_fds[0]);
    CHECK(wait_exit(pid) == 0);
    CHECK(result[2] == (long)file_bytes);
    if (result[0] < 0 || result[1] < 0) return; // no /proc: nothing to measure
    long growth_kb = result[1] - result[0];
    long tokens_kb = (long)(file_bytes * 2 / 1024), file_kb = (long)(file_bytes / 1024);
    // tokens + the mapped file + the 2.2 MB code point table, with slack for
    // the allocator (and a sanitizer's shadow memory)
    long limit_kb = tokens_kb + file_kb + tokens_kb / 4 + 16 * 1024;
    CHECK_MSG(growth_kb <= limit_kb, "corpus_load of %zu bytes raised the peak by %ld kB (tokens %ld kB, limit %ld kB)",
              file_bytes, growth_kb, tokens_kb, limit_kb);
    unlink(corpus);
}

// A folder tree for --data: text in the top folder and two levels below,
// a hidden file, a named pipe (passed over), a symbolic link back up the
// tree (read once), an empty file and an executable's first bytes.
static const char *make_text_tree(void) {
    const char *dir = keep_path(path_in(make_temp_dir(), "tree"));
    mkdir(dir, 0755);
    mkdir(path_in(dir, "sub"), 0755);
    mkdir(path_in(dir, "sub/deeper"), 0755);
    char *text = (char *)corpus_text(3000);
    write_file_bytes(path_in(dir, "a.txt"), text, 1000);
    write_file_bytes(path_in(dir, "sub/b.txt"), text + 1000, 1000);
    write_file_bytes(path_in(dir, "sub/deeper/c.txt"), text + 2000, 1000);
    free(text);
    write_file_bytes(path_in(dir, ".hidden.txt"), "\xff", 1);
    write_file_bytes(path_in(dir, "sub/empty.txt"), "", 0);
    write_file_bytes(path_in(dir, "bin.dat"), elf_header, sizeof elf_header);
    CHECK(mkfifo(path_in(dir, "sub/pipe"), 0644) == 0);
    CHECK(symlink("..", path_in(dir, "sub/deeper/up")) == 0);
    return dir;
}

// A folder is read with its subfolders, in sorted path order, each file
// once (the link back up the tree followed once); a bad file stops the
// load naming it, unless skipped: then each skipped file is named once,
// with why, and the rest loads.
static void test_folder_tree(void) {
    const char *dir = make_text_tree();
    Corpus corpus;
    char err[1024];
    int files;
    CHECK(!corpus_load_files(&corpus, dir, 0.1, NULL, &files, err, sizeof err));
    CHECK_MSG(strstr(err, "tree/bin.dat: NUL byte at offset 7 (a binary file, not text?)"), "%s", err);
    SkippedFiles skipped = {0};
    CHECK_MSG(corpus_load_files(&corpus, dir, 0.1, &skipped, &files, err, sizeof err), "%s", err);
    CHECK(files == 3 && corpus.num_tokens == 3002); // a.txt, sub/b.txt, sub/deeper/c.txt and 2 newlines
    CHECK(skipped.count == 2);
    if (skipped.count == 2) {
        CHECK(strstr(skipped.paths[0], "tree/bin.dat") &&
              !strcmp(skipped.reasons[0], "NUL byte at offset 7 (a binary file, not text?)"));
        CHECK(strstr(skipped.paths[1], "tree/sub/empty.txt") && !strcmp(skipped.reasons[1], "empty file"));
    }
    // in path order: a.txt, then sub/b.txt, then sub/deeper/c.txt
    unsigned char *text = corpus_text(3000);
    int in_order = corpus.num_tokens == 3002;
    for (size_t i = 0; in_order && i < 3002; i++) {
        size_t file = i / 1001, at = i % 1001;
        uint32_t expected = at == 1000 ? '\n' : text[file * 1000 + at];
        in_order = corpus.vocab.code_points[corpus.tokens[i]] == expected;
    }
    CHECK(in_order);
    free(text);
    skipped_files_free(&skipped);
    corpus_free(&corpus);
    // bin/train: the count in the first line, each file once
    const char *capture = keep_path(path_in(dir, "../out.txt"));
    int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 1 --data %s --skip-bad-files --out %s/../run", dir, dir);
    char *out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "tree (3 files, 2 skipped): 3002 characters") == strstr(out, "tree (") &&
                  strstr(out, "skipped ") && strstr(strstr(out, "\n"), "/tree/bin.dat: NUL byte at offset 7") &&
                  strstr(out, "/tree/sub/empty.txt: empty file\n") && !strstr(out, "pipe") &&
                  !strstr(out, "hidden"), "exited %d:\n%s", status, out);
    const char *first_line_end = strchr(out, '\n');
    CHECK(first_line_end && memmem(out, (size_t)(first_line_end - out), "2 skipped", 9));
    free(out);
    // without the flag: one line naming the first bad file
    status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 1 --data %s --out %s/../run2", dir, dir);
    out = output_of(capture);
    CHECK_MSG(status == 1 && count_lines(out) == 1 && strstr(out, "bin.dat: NUL byte at offset 7"), "%s", out);
    free(out);
}

// A named pipe in a comma-separated --data is refused before any file is
// opened (opening it would wait for a writer for ever), or skipped.
static void test_fifo_in_a_list(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "text.txt", 5000));
    const char *fifo = keep_path(path_in(dir, "fifo"));
    CHECK(mkfifo(fifo, 0644) == 0);
    const char *capture = keep_path(path_in(dir, "out.txt"));
    int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 1 --data %s,%s --out %s/run", corpus, fifo, dir);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && count_lines(out) == 1 && strstr(out, "fifo: not a regular file (a named pipe)"),
              "exited %d:\n%s", status, out);
    free(out);
    status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 1 --skip-bad-files --data %s,%s --out %s/run", corpus,
                 fifo, dir);
    out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "(1 file, 1 skipped)") && strstr(out, "fifo: not a regular file (a named pipe)"),
              "exited %d:\n%s", status, out);
    free(out);
    remove_tree(dir);
}

void suite_robust_bad_corpora(void) {
    run_test("robust: bad corpora: one line naming the file and the problem", test_bad_corpora);
    run_test("robust: --data DIR reads its subfolders in path order; --skip-bad-files names each skipped",
             test_folder_tree);
    run_test("robust: a named pipe in a --data list is refused or skipped, never waited on",
             test_fifo_in_a_list);
    run_test("robust: 65535 distinct characters train, save and sample", test_largest_vocabulary);
    run_test("robust: a corpus of one repeated character trains to loss 0",
             test_single_character_corpus);
    run_test("robust: corpus_load memory is the token array, not copies", test_corpus_load_memory);
}
