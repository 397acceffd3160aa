// files.c: whole-file reads, folders, atomic writes, and the record of
// what a program wrote into a folder (see files.h).
#include "files.h"

#include <dirent.h>
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

unsigned char *read_regular_file(const char *path, size_t *len, char *err, size_t err_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    FILE *in = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!in) {
        set_error(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(in), &st) != 0 || !S_ISREG(st.st_mode)) {
        set_error(err, err_len, "%s: not a regular file", path);
        fclose(in);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    unsigned char *bytes = xmalloc(size + 1);
    size_t got = fread(bytes, 1, size, in);
    int read_failed = ferror(in);
    fclose(in);
    if (read_failed || got != size) {
        set_error(err, err_len, "%s: read %zu of %zu bytes%s%s", path, got, size,
                  read_failed ? ": " : " (file changed while reading)",
                  read_failed ? strerror(errno) : "");
        free(bytes);
        return NULL;
    }
    bytes[size] = 0;
    *len = size;
    return bytes;
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

// ---- what a program wrote into a folder

void file_list_add(FileList *list, const char *path, const FileEntry *stamp) {
    if (list->count == list->capacity) {
        int capacity = list->capacity ? 2 * list->capacity : 16;
        FileEntry *grown = realloc(list->entries, sizeof(FileEntry) * (size_t)capacity);
        if (!grown) die("out of memory listing files");
        list->entries = grown;
        list->capacity = capacity;
    }
    FileEntry *e = &list->entries[list->count++];
    if (stamp) *e = *stamp;
    else memset(e, 0, sizeof *e);
    e->stamped = stamp != NULL;
    e->path = strdup(path);
    if (!e->path) die("out of memory listing files");
}

const FileEntry *file_list_find(const FileList *list, const char *path) {
    for (int i = 0; i < list->count; i++)
        if (!strcmp(list->entries[i].path, path)) return &list->entries[i];
    return NULL;
}

void file_list_free(FileList *list) {
    for (int i = 0; i < list->count; i++) free(list->entries[i].path);
    free(list->entries);
    memset(list, 0, sizeof *list);
}

// A file's stamp, from lstat.
static FileEntry stamp_of(const struct stat *st) {
    return (FileEntry){.stamped = 1, .size = st->st_size, .modified = st->st_mtime,
                       .device = st->st_dev, .inode = st->st_ino};
}

int written_record_read(const char *dir, const char *record_name, FileList *record, char *err,
                        size_t err_len) {
    memset(record, 0, sizeof *record);
    char path[4400], line[4400];
    snprintf(path, sizeof path, "%s/%s", dir, record_name);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT || errno == ENOTDIR) return 1;
        set_error(err, err_len, "%s: cannot read it: %s", path, strerror(errno));
        return 0;
    }
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        char *tab = strchr(line, '\t');
        long long size;
        FileEntry stamp = {.size = -1}; // a stamp that does not parse holds no file
        if (tab) {
            *tab = '\0';
            if (sscanf(tab + 1, "%lld", &size) == 1 && size >= 0) stamp.size = (off_t)size;
        }
        file_list_add(record, line, tab ? &stamp : NULL);
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        set_error(err, err_len, "%s: cannot read it", path);
        file_list_free(record);
        return 0;
    }
    return 1;
}

static int by_path(const void *a, const void *b) {
    return strcmp(((const FileEntry *)a)->path, ((const FileEntry *)b)->path);
}

int written_record_write(const char *dir, const char *record_name, const char *program,
                         const FileList *record, char *err, size_t err_len) {
    // in path order, whatever order the folder was read in: the same files, the same record
    FileEntry *sorted = xmalloc(sizeof(FileEntry) * (size_t)(record->count + 1));
    if (record->count) memcpy(sorted, record->entries, sizeof(FileEntry) * (size_t)record->count);
    qsort(sorted, (size_t)record->count, sizeof(FileEntry), by_path);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, record_name);
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) {
        free(sorted);
        return 0;
    }
    if (fprintf(af.file, "# %s wrote these into this folder, and writes here again only while "
                "the folder holds nothing else\n", program) < 0)
        atomic_file_write_failed(&af);
    for (int i = 0; i < record->count; i++) {
        const FileEntry *e = &sorted[i];
        int n = e->stamped ? fprintf(af.file, "%s\t%lld\n", e->path, (long long)e->size)
                           : fprintf(af.file, "%s\n", e->path);
        if (n < 0) atomic_file_write_failed(&af);
    }
    free(sorted);
    return atomic_file_commit(&af, err, err_len);
}

int written_record_holds(const char *dir, const FileEntry *entry) {
    char path[8800];
    snprintf(path, sizeof path, "%s/%s", dir, entry->path);
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    return !entry->stamped || (S_ISREG(st.st_mode) && st.st_size == entry->size);
}

// "name.tmp.<digits>" (atomic_file_open's temporary) of a listed file.
static int temporary_of_listed(const FileList *record, const char *path) {
    const char *tmp = strstr(path, ".tmp.");
    if (!tmp) return 0;
    for (const char *p; (p = strstr(tmp + 1, ".tmp."));) tmp = p;
    const char *digits = tmp + 5;
    if (!*digits || digits[strspn(digits, "0123456789")]) return 0;
    char listed[4400];
    snprintf(listed, sizeof listed, "%.*s", (int)(tmp - path), path);
    return file_list_find(record, listed) != NULL;
}

typedef struct {
    int count;
    char *first;
    size_t first_len;
} Foreign;

static void note_foreign(Foreign *found, const char *path) {
    if (found->count++ == 0 || strcmp(path, found->first) < 0)
        snprintf(found->first, found->first_len, "%s", path);
}

// The entries of root/rel that the record does not account for, into
// *found; returns how many entries the folder holds, -1 if it cannot be read.
static int foreign_in(const char *root, const char *rel, const char *record_name,
                      const FileList *record, Foreign *found, char *err, size_t err_len) {
    char dir_path[4400];
    if (*rel) snprintf(dir_path, sizeof dir_path, "%s/%s", root, rel);
    else snprintf(dir_path, sizeof dir_path, "%s", root);
    DIR *dir = opendir(dir_path);
    if (!dir) {
        set_error(err, err_len, "%s: cannot read the folder: %s", dir_path, strerror(errno));
        return -1;
    }
    int entries = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        entries++;
        if (!*rel && !strcmp(e->d_name, record_name)) continue;
        char path[4400], full[8800], as_folder[4401];
        snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, path);
        snprintf(as_folder, sizeof as_folder, "%s/", path);
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (file_list_find(record, as_folder)) continue;
            int inside = foreign_in(root, path, record_name, record, found, err, err_len);
            if (inside < 0) {
                closedir(dir);
                return -1;
            }
            if (inside == 0) note_foreign(found, as_folder);
        } else {
            const FileEntry *listed = file_list_find(record, path);
            if (listed ? !written_record_holds(root, listed) : !temporary_of_listed(record, path))
                note_foreign(found, path);
        }
    }
    closedir(dir);
    return entries;
}

int written_record_foreign(const char *dir, const char *record_name, const FileList *record,
                           char *first, size_t first_len, char *err, size_t err_len) {
    struct stat st;
    if (first_len) first[0] = '\0';
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    Foreign found = {0, first, first_len};
    if (foreign_in(dir, "", record_name, record, &found, err, err_len) < 0) return -1;
    return found.count;
}

// The regular files under root/rel into listing (not the record, not temporaries).
static void list_files(const char *root, const char *rel, const char *record_name,
                       FileList *listing) {
    char dir_path[4400];
    if (*rel) snprintf(dir_path, sizeof dir_path, "%s/%s", root, rel);
    else snprintf(dir_path, sizeof dir_path, "%s", root);
    DIR *dir = opendir(dir_path);
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!*rel && !strcmp(e->d_name, record_name)) continue;
        char path[4400], full[8800];
        snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, path);
        struct stat st;
        if (lstat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            list_files(root, path, record_name, listing);
        } else if (S_ISREG(st.st_mode) && !strstr(e->d_name, ".tmp.")) {
            FileEntry stamp = stamp_of(&st);
            file_list_add(listing, path, &stamp);
        }
    }
    closedir(dir);
}

void folder_listing(const char *dir, const char *record_name, FileList *listing) {
    memset(listing, 0, sizeof *listing);
    list_files(dir, "", record_name, listing);
}

void folder_changed_since(const char *dir, const char *record_name, const FileList *before,
                          FileList *changed) {
    FileList now;
    folder_listing(dir, record_name, &now);
    memset(changed, 0, sizeof *changed);
    for (int i = 0; i < now.count; i++) {
        const FileEntry *s = &now.entries[i], *b = file_list_find(before, s->path);
        if (!b || s->device != b->device || s->inode != b->inode || s->size != b->size ||
            s->modified != b->modified)
            file_list_add(changed, s->path, s);
    }
    file_list_free(&now);
}
