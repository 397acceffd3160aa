// files.h: reading a whole file, folders, and the one atomic file write
// (temporary file beside the target, fsync, rename, fsync of the folder)
// that checkpoints, pictures and logs all use, so a crash never leaves a
// torn file where a good one was.
#ifndef FILES_H
#define FILES_H

#include <stddef.h>
#include <stdio.h>

// A whole file in a new buffer (its length in *len, NUL-terminated too);
// dies with "path: reason" if it cannot be read.
char *read_whole_file(const char *path, size_t *len);

// 1 when something (file or folder) exists at path.
int file_exists(const char *path);

// Create the folder if it does not exist; dies if path is a file or the
// folder cannot be made.
void ensure_dir(const char *path);

// An atomic write: atomic_file_open makes "path.tmp.<pid>" in path's
// folder; the caller writes to .file; atomic_file_commit flushes, fsyncs
// and renames it over path (then fsyncs the folder), or atomic_file_abort
// removes it. Until the commit, whatever was at path is untouched.
typedef struct {
    FILE *file;
    char *path, *tmp_path;
    int failed;      // set by the caller when a write failed
    int saved_errno; // its errno
} AtomicFile;

// Returns 0 with "path: cannot create temporary file TMP: reason" in err.
int atomic_file_open(AtomicFile *af, const char *path, char *err, size_t err_len);
// Note a failed write (keeps the first errno).
void atomic_file_write_failed(AtomicFile *af);
// Returns 0 with "path: cannot <step> temporary file TMP: reason" or
// "path: cannot rename TMP over it: reason" in err (and the temporary
// removed). Frees af's buffers either way.
int atomic_file_commit(AtomicFile *af, char *err, size_t err_len);
void atomic_file_abort(AtomicFile *af);

// fwrite-like: write `bytes` to path atomically. Returns 0 with a message.
int write_file_atomic(const char *path, const void *data, size_t bytes, char *err, size_t err_len);

#endif
