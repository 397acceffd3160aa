// test_disk_faults.c: saves that fail (a full disk, a write cut short by
// the file size limit) and an --out that cannot be a folder. The run stops
// with the reason, and the checkpoint it had stays whole and resumes; a
// first save cut short leaves no checkpoint, and a fresh run starts there.
// log.csv rows that cannot be written are a warning, once, and the log
// keeps whole rows.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/mount.h> // Linux's mount(2): a tmpfs as the full disk
#endif

#include "check.h"
#include "fixtures.h"

// The run's first checkpoint is written at step 1, then a save fails: the
// run stops with the reason, both files stay byte for byte, no temporary is
// left, and once the cause is gone the run resumes.
static void check_failed_save(const char *dir, const char *run, const char *corpus,
                              const SpawnOptions *failing, const char *reason,
                              const char *remount) {
    const char *capture = keep_path(path_in(dir, "out.txt"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 100 --eval-every 100 --data %s --out %s --stop-at 1",
              corpus, run) == 0);
    copy_file(path_in(run, "model.safetensors"), path_in(dir, "model.before"));
    copy_file(path_in(run, "optimizer.safetensors"), path_in(dir, "state.before"));
    int status = RUN(capture, failing, "bin/train --resume --out %s --eval-every 1", run);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "error: saving optimizer state: ") && strstr(out, reason) &&
                  strstr(out, "optimizer.safetensors"),
              "exited %d:\n%s", status, out);
    free(out);
    CHECK(same_bytes(path_in(run, "model.safetensors"), path_in(dir, "model.before")));
    CHECK(same_bytes(path_in(run, "optimizer.safetensors"), path_in(dir, "state.before")));
    CHECK(count_temp_files(run) == 0);
    CHECK(checkpoint_step(run, NULL) == 1);
    CHECK(RUN(NULL, NULL, "bin/sample --ckpt %s -n 1", path_in(run, "model.safetensors")) == 0);
#if defined(__linux__)
    if (remount && mount("tmpfs", remount, "tmpfs", MS_REMOUNT, "size=4m") != 0)
        CHECK_MSG(0, "remount %s: %s", remount, strerror(errno));
#endif
    status = RUN(capture, NULL, "bin/train --resume --out %s --stop-at 3", run);
    out = output_of(capture);
    CHECK_MSG(status == 0, "exited %d:\n%s", status, out);
    free(out);
    CHECK(checkpoint_step(run, NULL) == 3);
}

#if defined(__linux__)
// The sizes of the files of one checkpoint in bytes, from a run on the
// real disk: the model and the optimizer state.
static void checkpoint_sizes(const char *dir, const char *corpus, long *model, long *state) {
    const char *probe = keep_path(path_in(dir, "probe"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 100 --eval-every 100 --data %s --out %s --stop-at 1",
              corpus, probe) == 0);
    *model = file_size(path_in(probe, "model.safetensors"));
    *state = file_size(path_in(probe, "optimizer.safetensors"));
    CHECK(*model > 4 * 4096 && *state > *model);
}

static long round_to_pages(long bytes) { return (bytes + 4095) / 4096 * 4096; }

// A tmpfs of `bytes` at dir/disk; NULL, the test skipped, where mounting
// is not permitted (the file size limit below still runs).
static const char *mount_disk(const char *dir, long bytes) {
    const char *disk = keep_path(path_in(dir, "disk"));
    mkdir(disk, 0755);
    char options[64];
    snprintf(options, sizeof options, "size=%ld", bytes);
    if (mount("tmpfs", disk, "tmpfs", 0, options) == 0) return disk;
    static char reason[128];
    snprintf(reason, sizeof reason, "cannot mount a tmpfs here: %s", strerror(errno));
    skip_test(reason);
    return NULL;
}

static void unmount_disk(const char *disk) {
    if (umount2(disk, MNT_DETACH) != 0) CHECK_MSG(0, "umount %s: %s", disk, strerror(errno));
}

// A full disk: a tmpfs just big enough for one checkpoint.
static void test_disk_full_keeps_checkpoint(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    long model, state;
    checkpoint_sizes(dir, corpus, &model, &state);
    // + log.csv, the record of what bin/train writes there, a margin
    const char *disk = mount_disk(dir, round_to_pages(model) + round_to_pages(state) + 4 * 4096);
    if (!disk) return;
    check_failed_save(dir, path_in(disk, "run"), corpus, NULL, "No space left on device", disk);
    unmount_disk(disk);
}

// The disk full during the first save's model, after its optimizer state:
// that state alone is no checkpoint. --resume says so, and once there is
// room a fresh run starts there, without --force, and resumes.
static void test_disk_full_at_first_save(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    long model, state;
    checkpoint_sizes(dir, corpus, &model, &state);
    // the optimizer state, log.csv and the record, and less than the model
    const char *disk = mount_disk(dir, round_to_pages(state) + 3 * 4096);
    if (!disk) return;
    const char *run = keep_path(path_in(disk, "run"));
    const char *flags = TINY_ONE_THREAD " --iters 4 --eval-every 2";
    int status = RUN(capture, NULL, "bin/train %s --data %s --out %s", flags, corpus, run);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "error: saving model: ") && strstr(out, "No space left on device"),
              "exited %d:\n%s", status, out);
    free(out);
    CHECK(file_exists(path_in(run, "optimizer.safetensors")) && !file_exists(path_in(run, "model.safetensors")));
    CHECK(count_temp_files(run) == 0);
    status = RUN(capture, NULL, "bin/train --resume --out %s", run);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "no checkpoint to resume") && strstr(out, "without its model") &&
                  !strstr(out, "--force") && count_lines(out) == 1,
              "exited %d:\n%s", status, out);
    free(out);
    if (mount("tmpfs", disk, "tmpfs", MS_REMOUNT, "size=4m") != 0)
        CHECK_MSG(0, "remount %s: %s", disk, strerror(errno));
    status = RUN(capture, NULL, "bin/train %s --data %s --out %s --stop-at 2", flags, corpus, run);
    out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "no checkpoint"), "exited %d:\n%s", status, out);
    free(out);
    CHECK(checkpoint_step(run, NULL) == 2);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s", run) == 0);
    CHECK(checkpoint_step(run, NULL) == 4);
    unmount_disk(disk);
}
// log.csv on a disk that fills (a tmpfs of 16 KB, the run's first save at
// its end): the first row that cannot be written is a warning, said once;
// the run goes on to its end, where its save fails on the full disk; the
// log holds whole rows only, the last of them well before the end.
static void test_log_rows_that_fail(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *disk = mount_disk(dir, 4 * 4096); // the record's page, and rows of 35 to 50 bytes
    if (!disk) return;
    const char *run = keep_path(path_in(disk, "run"));
    int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 1000 --eval-every 1000 "
                     "--data %s --out %s", corpus, run);
    char *out = output_of(capture);
    const char *warning = strstr(out, "warning: ");
    CHECK_MSG(status == 1 && warning && strstr(warning, "log.csv: cannot write: No space left on device") &&
                  !strstr(warning + 1, "warning: ") && strstr(out, "step 1000/1000") &&
                  strstr(out, "error: saving optimizer state: "),
              "exited %d:\n%s", status, out);
    free(out);
    char *log = read_text_file(path_in(run, "log.csv"));
    size_t len = log ? strlen(log) : 0;
    CHECK(log && len > 4096 && log[len - 1] == '\n');
    int rows = 0, whole = 0;
    long last = 0;
    // after the header, each row from the character after a newline
    for (const char *end = log ? strchr(log, '\n') : NULL; end && end[1]; end = strchr(end + 1, '\n')) {
        const char *row = end + 1, *c = row;
        int commas = 0;
        for (; *c && *c != '\n'; c++) commas += *c == ',';
        rows++;
        whole += commas == 5 && *c == '\n';
        last = atol(row);
    }
    CHECK_MSG(rows > 50 && whole == rows && last < 900, "%d rows, %d whole, the last step %ld",
              rows, whole, last);
    free(log);
    unmount_disk(disk);
}
#else
static void test_disk_full_keeps_checkpoint(void) { skip_test("a tmpfs is mounted with Linux's mount(2)"); }
static void test_disk_full_at_first_save(void) { skip_test("a tmpfs is mounted with Linux's mount(2)"); }
static void test_log_rows_that_fail(void) { skip_test("a tmpfs is mounted with Linux's mount(2)"); }
#endif

// A write that fails half way for another reason (the file size limit).
static void test_failed_write_keeps_checkpoint(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    SpawnOptions limit = {NULL, 8192};
    check_failed_save(dir, keep_path(path_in(dir, "run")), corpus, &limit, "File too large", NULL);
}

// --out under a regular file: refused before any work, naming the path.
static void test_out_under_a_file(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *file = keep_path(path_in(dir, "file"));
    write_file_bytes(file, "keep", 4);
    int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --data %s --out %s/run", corpus, file);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "cannot create folder") && strstr(out, "Not a directory"),
              "exited %d:\n%s", status, out);
    free(out);
    status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --data %s --out %s", corpus, file);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "is not a folder"), "exited %d:\n%s", status, out);
    free(out);
    char *kept = read_text_file(file);
    CHECK(kept && !strcmp(kept, "keep"));
    free(kept);
}

void suite_robust_disk_faults(void) {
    run_test("robust: disk full (tmpfs) stops the run, checkpoint intact", test_disk_full_keeps_checkpoint);
    run_test("robust: a write failing half way stops the run, checkpoint intact",
             test_failed_write_keeps_checkpoint);
    run_test("robust: --out under a regular file", test_out_under_a_file);
    run_test("robust: disk full (tmpfs) at the first save: no checkpoint, a fresh run starts there",
             test_disk_full_at_first_save);
    run_test("robust: log.csv rows that cannot be written: a warning, once, and whole rows",
             test_log_rows_that_fail);
}
