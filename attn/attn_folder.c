// attn_folder.c: --out checked before anything is written, and the record
// of what bin/attn wrote there kept as it writes.
#include "attn_folder.h"

#include <stdio.h>

// ---- the output folder

// The record bin/attn keeps in every folder it writes (base/files.h): each
// file it wrote there, as it left it.
#define OUT_RECORD ".written-by-bin-attn"

// --out must be new, empty, or hold only what bin/attn wrote there, as it
// left it (its record), unless --force: a user's files are never replaced
// unasked.
void check_out_folder(const AttnOptions *o, OutFolder *folder) {
    char err[4400], first[4400];
    folder->out = o->out;
    if (!written_record_read(o->out, OUT_RECORD, &folder->last, err, sizeof err)) die("%s", err);
    folder_listing(o->out, OUT_RECORD, &folder->before);
    if (o->force) return;
    int foreign = written_record_foreign(o->out, OUT_RECORD, &folder->last, first, sizeof first,
                                         err, sizeof err);
    if (foreign < 0) die("--out %s", err);
    char more[64] = "";
    if (foreign > 1) snprintf(more, sizeof more, " and %d more", foreign - 1);
    if (foreign > 0)
        die("--out %s: the folder holds files that bin/attn did not write (%s%s); give a new or "
            "empty folder, or --force to write into it", o->out, first, more);
}

// Record what bin/attn wrote in --out: the files this run wrote, and while
// it is not done, those the runs before wrote (they are still bin/attn's).
// Done, it removes those the runs before wrote and this one did not (a
// larger model's heads, an analysis not asked for again), each only while
// it is as bin/attn left it: never a file it did not write. A --force run
// records only what it wrote itself, so the user's files stay theirs.
// Returns 0 with a message in err.
static int record_out_folder(const OutFolder *folder, int done, char *err, size_t err_len) {
    FileList record;
    folder_changed_since(folder->out, OUT_RECORD, &folder->before, &record);
    int removed = 0;
    for (int i = 0; i < folder->last.count; i++) {
        const FileEntry *e = &folder->last.entries[i];
        if (file_list_find(&record, e->path) || !written_record_holds(folder->out, e)) continue;
        char path[8800];
        snprintf(path, sizeof path, "%s/%s", folder->out, e->path);
        if (done && remove(path) == 0) removed++;
        else file_list_add(&record, e->path, e);
    }
    // nothing written (a run that failed at its first file): no record either
    int ok = !record.count || written_record_write(folder->out, OUT_RECORD, "bin/attn", &record,
                                                   err, err_len);
    file_list_free(&record);
    if (ok && removed)
        printf("removed %d file%s an earlier run wrote in %s and this one did not\n", removed,
               removed == 1 ? "" : "s", folder->out);
    return ok;
}

void record_out_folder_or_die(const OutFolder *folder, int done) {
    char err[4400];
    if (!record_out_folder(folder, done, err, sizeof err)) {
        set_fatal_hook(NULL); // recording is what failed
        die("%s", err);
    }
}

// A run that fails once it has written records what it wrote, so that the
// next may write there again: the folder for base/util.h's fatal hook, which
// takes no argument.
static const OutFolder *out_folder_written;

static void record_before_exit(int exit_code, const char *message) {
    (void)exit_code, (void)message;
    set_fatal_hook(NULL);
    char err[4400];
    if (out_folder_written && !record_out_folder(out_folder_written, 0, err, sizeof err))
        fprintf(stderr, "warning: %s\n", err);
}
void record_out_folder_on_failure(const OutFolder *folder) {
    out_folder_written = folder;
    set_fatal_hook(record_before_exit);
}
