// test_user_files.c: issue 43, "nothing the user has is lost". bin/train
// and bin/attn write only into a folder that is new, empty or holds nothing
// but what they wrote there (their record, base/files.h), unless --force,
// which writes into it without making it theirs; a rerun of bin/attn
// removes what it wrote before and no longer writes, never a file it did
// not write; an optimizer state without its model is no checkpoint; and
// bin/sample refuses samples that would not fit in memory before it
// allocates them. Each refusal is one line, exit 1, and the user's files
// are checked byte for byte afterwards.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/files.h"
#include "../infer/checkpoint.h"
#include "check.h"
#include "fixtures.h"

#define TRAIN_RECORD ".written-by-bin-train"
#define ATTN_RECORD ".written-by-bin-attn"
#define ONE_STEP TINY_ONE_THREAD " --iters 1 --eval-every 1"

// The files under dir as folder_listing stamps them (name, size, time,
// inode): equal listings mean nothing was written, replaced or removed.
static int same_listing(const FileList *a, const FileList *b) {
    if (a->count != b->count) return 0;
    for (int i = 0; i < a->count; i++) {
        const FileEntry *x = &a->entries[i], *y = file_list_find(b, x->path);
        if (!y || x->size != y->size || x->modified != y->modified || x->inode != y->inode) return 0;
    }
    return 1;
}

// A refused run: exit 1, one line holding every one of says (NULL-ended).
static void check_refused(int status, const char *capture, const char *const *says) {
    char *out = output_of(capture);
    int all = status == 1 && count_lines(out) == 1;
    for (int i = 0; says[i]; i++) all = all && strstr(out, says[i]);
    CHECK_MSG(all, "exited %d:\n%s", status, out);
    free(out);
}

// A model of this shape over VOCAB's characters, saved in a new folder.
#define VOCAB "\n !,.:;?abcdefghijklmnopqrstuvwxyz"
static const char *save_shaped_model(int layers, int heads, int dim, int context) {
    static char paths[4][600];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, sizeof paths[0], "%s/model.safetensors", make_temp_dir());
    Vocab vocab;
    GPT model;
    char err[512];
    CHECK(vocab_build(&vocab, (const unsigned char *)VOCAB, strlen(VOCAB), err, sizeof err));
    GPTConfig cfg = {.vocab_size = vocab.size, .context = context, .layers = layers, .heads = heads, .dim = dim};
    build_model(&model, &cfg, (RandomWeights){5, 0.3f, 6});
    CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    return path;
}

// ---- bin/train

// A fresh run into a folder holding anything but what bin/train wrote is
// refused, naming the folder, the first such file and --force: a user's
// log.csv (which a run would have replaced, and loss.png with it), a
// folder of the user's documents, an empty subfolder; nothing in it is
// touched, no record is left. An empty folder is fine.
static void test_train_refuses_users_folder(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const struct {
        const char *name, *bytes, *says; // a name ending in '/' is an empty folder
    } users[] = {{"log.csv", "notes\n", "(log.csv)"},
                 {"index.md", "# my notes\n", "(index.md)"},
                 {"drafts/", NULL, "(drafts/)"}};
    for (size_t i = 0; i < sizeof users / sizeof users[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "mine%zu", i);
        const char *mine = keep_path(path_in(dir, name));
        CHECK(mkdir(mine, 0755) == 0);
        if (users[i].bytes) write_file_bytes(path_in(mine, users[i].name), users[i].bytes, strlen(users[i].bytes));
        else CHECK(mkdir(path_in(mine, users[i].name), 0755) == 0);
        FileList before, after;
        folder_listing(mine, "", &before);
        int status = RUN(capture, NULL, "bin/train " ONE_STEP " --data %s --out %s", corpus, mine);
        const char *says[] = {mine, "did not write", users[i].says, "--force", NULL};
        check_refused(status, capture, says);
        folder_listing(mine, "", &after);
        CHECK_MSG(same_listing(&before, &after) && !file_exists(path_in(mine, TRAIN_RECORD)),
                  "%s was touched", mine);
        if (users[i].bytes) {
            char *kept = read_text_file(path_in(mine, users[i].name));
            CHECK(kept && !strcmp(kept, users[i].bytes));
            free(kept);
        }
        file_list_free(&before), file_list_free(&after);
    }
    const char *empty = keep_path(path_in(dir, "empty"));
    CHECK(mkdir(empty, 0755) == 0);
    CHECK(RUN(NULL, NULL, "bin/train " ONE_STEP " --data %s --out %s", corpus, empty) == 0);
    CHECK(checkpoint_step(empty, NULL) == 1);
}

// --force writes into a folder of the user's without making it bin/train's:
// the user's files are untouched, and once the checkpoint is gone a fresh
// run without --force is refused again. A folder only bin/train wrote
// (with its snapshots in attn/, and a temporary a cut save left) takes a
// fresh run once its checkpoint is gone, and --resume as before.
static void test_train_force_does_not_adopt(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *mine = keep_path(path_in(dir, "mine"));
    const char *notes = keep_path(path_in(mine, "notes.txt"));
    CHECK(mkdir(mine, 0755) == 0);
    write_file_bytes(notes, "mine\n", 5);
    CHECK(RUN(NULL, NULL, "bin/train " ONE_STEP " --data %s --out %s --force", corpus, mine) == 0);
    char *kept = read_text_file(notes);
    CHECK(kept && !strcmp(kept, "mine\n"));
    free(kept);
    CHECK(checkpoint_step(mine, NULL) == 1);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s --iters 2", mine) == 0);
    remove(path_in(mine, "model.safetensors"));
    remove(path_in(mine, "optimizer.safetensors"));
    int status = RUN(capture, NULL, "bin/train " ONE_STEP " --data %s --out %s", corpus, mine);
    const char *says[] = {"did not write (notes.txt)", "--force", NULL};
    check_refused(status, capture, says);

    const char *own = keep_path(path_in(dir, "own"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 2 --eval-every 2 --heatmaps-every 1 "
              "--data %s --out %s", corpus, own) == 0);
    CHECK(file_exists(path_in(own, "attn/step_2")) && file_exists(path_in(own, "loss.png")));
    remove(path_in(own, "model.safetensors"));
    remove(path_in(own, "optimizer.safetensors"));
    write_file_bytes(path_in(own, "log.csv.tmp.12345"), "step", 4);
    status = RUN(capture, NULL, "bin/train " ONE_STEP " --data %s --out %s", corpus, own);
    char *out = output_of(capture);
    CHECK_MSG(status == 0, "exited %d:\n%s", status, out);
    free(out);
    CHECK(checkpoint_step(own, NULL) == 1);
}

// An interrupted first save (a kill between its two files) leaves the
// optimizer state without its model: no checkpoint. --resume says so (not
// "--force"), and a fresh run, which says so too, starts there without
// --force and resumes.
static void test_train_interrupted_first_save(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *run = keep_path(path_in(dir, "run"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 9 --eval-every 9 --stop-at 1 "
              "--data %s --out %s", corpus, run) == 0);
    CHECK(remove(path_in(run, "model.safetensors")) == 0); // the second rename never came
    copy_file(path_in(run, "optimizer.safetensors"), path_in(dir, "state.before"));
    int status = RUN(capture, NULL, "bin/train --resume --out %s", run);
    const char *says[] = {"no checkpoint to resume", "optimizer.safetensors is there without its model",
                          "start a fresh run", NULL};
    check_refused(status, capture, says);
    char *out = output_of(capture);
    CHECK_MSG(!strstr(out, "--force"), "%s", out);
    free(out);
    CHECK(same_bytes(path_in(run, "optimizer.safetensors"), path_in(dir, "state.before")));
    status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 4 --eval-every 4 --stop-at 2 "
                 "--data %s --out %s", corpus, run);
    out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "without its model") && strstr(out, "no checkpoint"),
              "exited %d:\n%s", status, out);
    free(out);
    CHECK(checkpoint_step(run, NULL) == 2);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s", run) == 0);
    CHECK(checkpoint_step(run, NULL) == 4);
}

// ---- bin/attn

// The files bin/attn writes for a model, in a folder of their own: their
// listing (the record left out).
static void attn_files(const char *ckpt, const char *text_file, const char *flags, FileList *files) {
    const char *out = keep_path(path_in(make_temp_dir(), "alone"));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text-file %s --out %s %s", ckpt, text_file, out,
             flags);
    CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
    folder_listing(out, ATTN_RECORD, files);
}

// The user's ablation.csv in a folder bin/attn was told (--force) to write
// into without --ablate stays the user's: a later --ablate run without
// --force is refused, naming it, and leaves it byte for byte.
static void test_attn_force_does_not_adopt(void) {
    const char *ckpt = save_shaped_model(2, 2, 16, 16);
    const char *dir = make_temp_dir();
    const char *text = keep_path(path_in(dir, "text.txt"));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *mine = keep_path(path_in(dir, "mine"));
    const char *csv = keep_path(path_in(mine, "ablation.csv"));
    write_file_bytes(text, "to be or not", 12);
    CHECK(mkdir(mine, 0755) == 0);
    write_file_bytes(csv, "my,own\n", 7);
    int status = RUN(capture, NULL, "bin/attn --ckpt %s --text-file %s --out %s", ckpt, text, mine);
    const char *refused[] = {"did not write (ablation.csv)", "--force", NULL};
    check_refused(status, capture, refused);
    CHECK(RUN(NULL, NULL, "bin/attn --ckpt %s --text-file %s --out %s --force", ckpt, text, mine) == 0);
    CHECK(file_exists(path_in(mine, "overview.png")) && file_exists(path_in(mine, ATTN_RECORD)));
    status = RUN(capture, NULL, "bin/attn --ckpt %s --text-file %s --out %s --ablate", ckpt, text, mine);
    check_refused(status, capture, refused);
    char *kept = read_text_file(csv);
    CHECK_MSG(kept && !strcmp(kept, "my,own\n"), "ablation.csv: %s", kept ? kept : "(gone)");
    free(kept);
}

// A rerun into bin/attn's own folder with a smaller model removes the
// larger one's extra heads and what an analysis not asked for again wrote:
// the folder then holds what the smaller model's run writes alone. Into a
// folder holding a file of the user's (--force), and one of bin/attn's
// that the user changed since, those two stay, byte for byte.
static void test_attn_rerun_removes_what_it_wrote(void) {
    const char *large = save_shaped_model(2, 2, 16, 16), *small = save_shaped_model(1, 1, 16, 16);
    const char *dir = make_temp_dir();
    const char *text = keep_path(path_in(dir, "text.txt"));
    const char *out = keep_path(path_in(dir, "out"));
    write_file_bytes(text, "to be or not", 12);
    FileList alone, now;
    attn_files(small, text, "", &alone);
    CHECK(RUN(NULL, NULL, "bin/attn --ckpt %s --text-file %s --out %s --ablate --lens", large, text, out) == 0);
    CHECK(file_exists(path_in(out, "layer1_head1.png")) && file_exists(path_in(out, "ablation.csv")));
    CHECK(RUN(NULL, NULL, "bin/attn --ckpt %s --text-file %s --out %s", small, text, out) == 0);
    folder_listing(out, ATTN_RECORD, &now);
    CHECK_MSG(alone.count > 10 && now.count == alone.count, "%d files, alone %d", now.count, alone.count);
    for (int i = 0; i < alone.count; i++)
        CHECK_MSG(file_list_find(&now, alone.entries[i].path), "%s missing", alone.entries[i].path);
    file_list_free(&now);

    // the large model again, then the user's notes and an edited ablation.csv
    CHECK(RUN(NULL, NULL, "bin/attn --ckpt %s --text-file %s --out %s --ablate", large, text, out) == 0);
    const char *notes = keep_path(path_in(out, "notes.txt")), *csv = keep_path(path_in(out, "ablation.csv"));
    write_file_bytes(notes, "mine\n", 5);
    char *edited = read_text_file(csv);
    CHECK(edited != NULL);
    if (!edited) return;
    size_t len = strlen(edited);
    edited = realloc(edited, len + 16);
    strcpy(edited + len, "my,row\n");
    write_file_bytes(csv, edited, len + 7);
    CHECK(RUN(NULL, NULL, "bin/attn --ckpt %s --text-file %s --out %s --force", small, text, out) == 0);
    char *kept = read_text_file(csv), *kept_notes = read_text_file(notes);
    CHECK(kept && !strcmp(kept, edited) && kept_notes && !strcmp(kept_notes, "mine\n"));
    CHECK(!file_exists(path_in(out, "layer1_head1.png")) && !file_exists(path_in(out, "ablation.png")));
    folder_listing(out, ATTN_RECORD, &now);
    CHECK_MSG(now.count == alone.count + 2, "%d files, alone %d", now.count, alone.count);
    free(kept), free(kept_notes), free(edited);
    file_list_free(&now), file_list_free(&alone);
}

// ---- bin/sample

// Samples that would not fit in the machine's memory are refused from an
// estimate before anything is allocated, with the figure and how many
// would fit: 256 samples of a 65536-character context need terabytes of
// attention scratch alone (K x NH x T x T floats), whatever the machine.
static void test_sample_memory_estimate(void) {
    const char *ckpt = save_shaped_model(1, 1, 4, 65536);
    const char *capture = keep_path(path_in(make_temp_dir(), "out.txt"));
    int status = RUN(capture, NULL, "bin/sample --ckpt %s --num-samples 256 -n 1", ckpt);
    const char *says[] = {"256 samples of 1 character need about ", " GB of memory, more than 90% of the ",
                          " GB available; ", NULL};
    check_refused(status, capture, says);
}

void suite_user_files(void) {
    run_test("user files: bin/train refuses a folder of the user's, leaving it as it was",
             test_train_refuses_users_folder);
    run_test("user files: bin/train --force does not make the user's folder its own",
             test_train_force_does_not_adopt);
    run_test("user files: an optimizer state without its model is no checkpoint",
             test_train_interrupted_first_save);
    run_test("user files: bin/attn --force does not make the user's folder its own",
             test_attn_force_does_not_adopt);
    run_test("user files: bin/attn removes what it wrote before and no longer writes, nothing else",
             test_attn_rerun_removes_what_it_wrote);
    run_test("user files: bin/sample refuses samples that would not fit in memory",
             test_sample_memory_estimate);
}
