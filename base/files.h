// files.h: reading a whole file, folders, the one atomic file write
// (temporary file beside the target, fsync, rename, fsync of the folder)
// that checkpoints, pictures and logs all use, so a crash never leaves a
// torn file where a good one was; and the record a program keeps of what
// it wrote into a folder, so that it never replaces a user's file unasked.
#ifndef FILES_H
#define FILES_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

// A whole file in a new buffer (its length in *len, NUL-terminated too);
// dies with "path: reason" if it cannot be read.
char *read_whole_file(const char *path, size_t *len);

// A regular file read whole into a new buffer (*len bytes, then a NUL), or
// NULL with "path: reason" in err when it cannot be opened, is not a
// regular file (a FIFO is refused at once, not waited on for a writer), or
// changed while it was read. What the format readers (safetensors, GGUF)
// take in before they believe any of it.
unsigned char *read_regular_file(const char *path, size_t *len, char *err, size_t err_len);

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

// ---- what a program wrote into a folder
//
// A program that writes into a folder the user names (bin/train's --out,
// bin/attn's --out) keeps a record there, DIR/.written-by-<program>: a
// comment line, then what it wrote, a line each: a path relative to DIR
// ("circuits/layer0_head0.png"; "attn/" for that folder and all in it),
// followed by a tab and the file's size when the record stands only for
// the file as the program left it (not its time, so that two runs that
// write the same files write the same record). It writes into
// a folder only when the folder is new, empty, or holds nothing but what
// the record accounts for, unless told to (--force); and the record lists
// only what the program itself wrote, so a forced run never makes the
// user's files its own.

// A file (or with a final '/', a folder) relative to a folder, and when
// stamped, its size as listed or recorded; a listing also holds what any
// write changes: its time, and with an atomic write, the file itself (a
// new inode, even within the same second).
typedef struct {
    char *path;
    int stamped;
    off_t size;
    time_t modified;
    dev_t device;
    ino_t inode;
} FileEntry;

typedef struct {
    FileEntry *entries;
    int count, capacity;
} FileList;

// Add path (copied), with stamp's size, time and identity when stamp is not NULL.
void file_list_add(FileList *list, const char *path, const FileEntry *stamp);
const FileEntry *file_list_find(const FileList *list, const char *path);
void file_list_free(FileList *list);

// The record's entries (none when dir or the record does not exist).
// Returns 0 with "DIR/RECORD: reason" in err when it cannot be read.
int written_record_read(const char *dir, const char *record_name, FileList *record, char *err,
                        size_t err_len);
// Write the record atomically: a line naming the program, then the entries.
int written_record_write(const char *dir, const char *record_name, const char *program,
                         const FileList *record, char *err, size_t err_len);
// Whether dir/entry->path is the file the entry recorded: there, and when
// stamped, a regular file of the same size.
int written_record_holds(const char *dir, const FileEntry *entry);
// The entries of dir, at any depth, that the record does not account for,
// and in *first (first_len bytes) the first of them in path order; 0 when
// there are none (or dir does not exist, or is not a folder: creating it
// says why), -1 with a message in err when dir cannot be read. The record
// accounts for itself, each file it holds (written_record_holds), all
// under a folder it lists as "folder/", a listed file's temporary
// ("name.tmp.PID", left by a write that was cut), and a folder that is not
// empty and holds nothing else; an empty folder it does not list is the
// user's.
int written_record_foreign(const char *dir, const char *record_name, const FileList *record,
                           char *first, size_t first_len, char *err, size_t err_len);

// The regular files under dir, at any depth (none when dir does not
// exist), stamped; the record and temporaries left out.
void folder_listing(const char *dir, const char *record_name, FileList *listing);
// The files under dir now (stamped) that are not in `before` or were
// written since: every write here is atomic, a new file renamed over the
// old one, so a new inode, and any other write a new size or time.
void folder_changed_since(const char *dir, const char *record_name, const FileList *before,
                          FileList *changed);

#endif