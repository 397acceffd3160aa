// files.c: whole-file reads, folders, and atomic writes (see files.h).
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

char *read_whole_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0, got;
    char *buf = xmalloc(cap);
    while ((got = fread(buf + n, 1, cap - 1 - n, f)) > 0) {
        n += got;
        if (n == cap - 1) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf) die("%s: out of memory reading it", path);
        }
    }
    if (ferror(f)) die("%s: %s", path, strerror(errno ? errno : EIO));
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

void ensure_dir(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) die("%s: exists and is not a folder", path);
        return;
    }
    if (mkdir(path, 0755) != 0) die("%s: cannot create folder: %s", path, strerror(errno));
}

// What fsync promises on Linux: the file's data on the disk. macOS's fsync
// only hands it to the drive, whose cache may still lose it; there
// F_FULLFSYNC asks the drive to write it (fcntl(2)), and fsync is the
// fallback where the filesystem does not support that.
static int sync_to_disk(int fd) {
#if defined(__APPLE__) && defined(F_FULLFSYNC)
    if (fcntl(fd, F_FULLFSYNC) == 0) return 0;
#endif
    return fsync(fd);
}

// Sync the folder holding path so the rename itself survives a power cut.
// Failure only weakens that guarantee (the file is already in place), so
// it is not reported.
static void sync_parent_dir(const char *path) {
    char *dir = xmalloc(strlen(path) + 2);
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        sync_to_disk(fd);
        close(fd);
    }
    free(dir);
}

static void atomic_file_release(AtomicFile *af) {
    free(af->path);
    free(af->tmp_path);
    memset(af, 0, sizeof *af);
}

int atomic_file_open(AtomicFile *af, const char *path, char *err, size_t err_len) {
    memset(af, 0, sizeof *af);
    // Same folder as path, so the rename cannot cross filesystems; the pid
    // keeps two processes saving to one path from sharing a temporary.
    size_t tmp_len = strlen(path) + 32;
    af->path = strdup(path);
    af->tmp_path = xmalloc(tmp_len);
    if (!af->path) die("out of memory");
    snprintf(af->tmp_path, tmp_len, "%s.tmp.%ld", path, (long)getpid());
    af->file = fopen(af->tmp_path, "wb");
    if (!af->file) {
        set_error(err, err_len, "%s: cannot create temporary file %s: %s", path, af->tmp_path,
                  strerror(errno));
        atomic_file_release(af);
        return 0;
    }
    return 1;
}

void atomic_file_write_failed(AtomicFile *af) {
    if (!af->failed) af->saved_errno = errno;
    af->failed = 1;
}

int atomic_file_commit(AtomicFile *af, char *err, size_t err_len) {
    const char *failed_step = af->failed ? "write" : NULL;
    int saved_errno = af->saved_errno;
    if (!failed_step && (fflush(af->file) != 0 || sync_to_disk(fileno(af->file)) != 0)) {
        failed_step = "flush";
        saved_errno = errno;
    }
    if (fclose(af->file) != 0 && !failed_step) {
        failed_step = "close";
        saved_errno = errno;
    }
    if (failed_step) {
        set_error(err, err_len, "%s: cannot %s temporary file %s: %s", af->path, failed_step,
                  af->tmp_path, strerror(saved_errno));
        remove(af->tmp_path);
        atomic_file_release(af);
        return 0;
    }
    if (rename(af->tmp_path, af->path) != 0) {
        set_error(err, err_len, "%s: cannot rename %s over it: %s", af->path, af->tmp_path,
                  strerror(errno));
        remove(af->tmp_path);
        atomic_file_release(af);
        return 0;
    }
    sync_parent_dir(af->path);
    atomic_file_release(af);
    return 1;
}

void atomic_file_abort(AtomicFile *af) {
    if (af->file) fclose(af->file);
    if (af->tmp_path) remove(af->tmp_path);
    atomic_file_release(af);
}

int write_file_atomic(const char *path, const void *data, size_t bytes, char *err,
                      size_t err_len) {
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) return 0;
    if (bytes && fwrite(data, 1, bytes, af.file) != bytes) atomic_file_write_failed(&af);
    return atomic_file_commit(&af, err, err_len);
}
