// corpus_files.c: --data as several files, patterns or a folder (and its
// subfolders), joined into one corpus (each file checked on its own, so an error names
// it, or with --skip-bad-files the file is skipped and named).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"

// realloc and strdup that die when memory runs out (xmalloc's memory is
// aligned and cannot be grown).
static void *grow(void *p, size_t bytes) {
    void *q = realloc(p, bytes);
    if (!q) die("out of memory (%zu bytes)", bytes);
    return q;
}

static char *copy_string(const char *s) { return strcpy(grow(NULL, strlen(s) + 1), s); }

typedef struct {
    char **paths;
    int count, capacity;
} PathList;

static void path_list_add(PathList *list, const char *path) {
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? 2 * list->capacity : 16;
        list->paths = grow(list->paths, sizeof(char *) * (size_t)list->capacity);
    }
    list->paths[list->count++] = copy_string(path);
}

static void path_list_free(PathList *list) {
    for (int i = 0; i < list->count; i++) free(list->paths[i]);
    free(list->paths);
    memset(list, 0, sizeof *list);
}

static int compare_paths(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void skipped_files_free(SkippedFiles *skipped) {
    for (int i = 0; i < skipped->count; i++) {
        free(skipped->paths[i]);
        free(skipped->reasons[i]);
    }
    free(skipped->paths);
    free(skipped->reasons);
    memset(skipped, 0, sizeof *skipped);
}

// Note that `path` is skipped, and why (`reason` starts with the path, as
// every error here does: it is dropped).
static void skip_file(SkippedFiles *skipped, const char *path, const char *reason) {
    size_t n = strlen(path);
    if (!strncmp(reason, path, n) && !strncmp(reason + n, ": ", 2)) reason += n + 2;
    skipped->paths = grow(skipped->paths, sizeof(char *) * (size_t)(skipped->count + 1));
    skipped->reasons = grow(skipped->reasons, sizeof(char *) * (size_t)(skipped->count + 1));
    skipped->paths[skipped->count] = copy_string(path);
    skipped->reasons[skipped->count++] = copy_string(reason);
}

// The folders already read, by device and inode: a symbolic link back up
// the tree (or a second link to a folder) is read once.
typedef struct {
    dev_t *devices;
    ino_t *inodes;
    int count;
} Visited;

static int visit(Visited *visited, const struct stat *st) {
    for (int i = 0; i < visited->count; i++)
        if (visited->devices[i] == st->st_dev && visited->inodes[i] == st->st_ino) return 0;
    visited->devices = grow(visited->devices, sizeof(dev_t) * (size_t)(visited->count + 1));
    visited->inodes = grow(visited->inodes, sizeof(ino_t) * (size_t)(visited->count + 1));
    visited->devices[visited->count] = st->st_dev;
    visited->inodes[visited->count++] = st->st_ino;
    return 1;
}

// dir's regular files and, recursively, its folders' (not hidden ones;
// symbolic links followed, each folder once). Other entries (FIFOs,
// sockets, devices, broken links) are not text files and are passed over.
static int add_tree(PathList *list, const char *dir, Visited *visited, char *err, size_t err_len) {
    DIR *d = opendir(dir);
    if (!d) {
        set_error(err, err_len, "%s: %s", dir, strerror(errno));
        return 0;
    }
    int ok = 1;
    struct dirent *entry;
    while (ok && (entry = readdir(d))) {
        if (entry->d_name[0] == '.') continue;
        size_t len = strlen(dir) + strlen(entry->d_name) + 2;
        char *path = grow(NULL, len);
        snprintf(path, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", entry->d_name);
        struct stat st;
        if (stat(path, &st) != 0) {
            // a broken link: nothing to read
        } else if (S_ISREG(st.st_mode)) {
            path_list_add(list, path);
        } else if (S_ISDIR(st.st_mode) && visit(visited, &st)) {
            ok = add_tree(list, path, visited, err, err_len);
        }
        free(path);
    }
    closedir(d);
    return ok;
}

// A folder's files, its subfolders' included, in sorted path order.
static int add_folder(PathList *list, const char *dir, char *err, size_t err_len) {
    int first = list->count;
    Visited visited = {0};
    struct stat st;
    int ok = stat(dir, &st) == 0 && visit(&visited, &st);
    ok = ok && add_tree(list, dir, &visited, err, err_len);
    free(visited.devices);
    free(visited.inodes);
    if (!ok) return 0;
    if (list->count == first) {
        set_error(err, err_len, "%s: is a directory with no files in it", dir);
        return 0;
    }
    qsort(list->paths + first, (size_t)(list->count - first), sizeof(char *), compare_paths);
    return 1;
}

// One item of a comma-separated --data: a folder, or a regular file. A
// FIFO or device is refused here, before any file is opened (opening a
// FIFO waits for a writer). Returns 0 with a message; *special is set when
// the item exists but is not a regular file or folder (what
// --skip-bad-files may skip).
static int add_path(PathList *list, const char *path, int *special, char *err, size_t err_len) {
    struct stat st;
    *special = 0;
    if (stat(path, &st) != 0) {
        set_error(err, err_len, "%s: %s", path, strerror(errno));
        return 0;
    }
    if (S_ISDIR(st.st_mode)) return add_folder(list, path, err, err_len);
    if (!S_ISREG(st.st_mode)) {
        set_error(err, err_len, "%s: not a regular file (%s)", path,
                  S_ISFIFO(st.st_mode) ? "a named pipe" : S_ISSOCK(st.st_mode) ? "a socket"
                                                                                 : "a device");
        *special = 1;
        return 0;
    }
    path_list_add(list, path);
    return 1;
}

// The whole file into *text at *len + sep (grown as needed), checked alone
// (UTF-8, no NUL, not empty). Returns the bytes it holds, or 0 with a
// message naming the file (and *len as it was). Never blocks on a file
// that turned into a FIFO since it was listed.
static size_t read_one_file(const char *path, unsigned char **text, size_t len, size_t sep,
                            size_t *capacity, char *err, size_t err_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        set_error(err, err_len, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return 0;
    }
    if (!S_ISREG(st.st_mode)) {
        set_error(err, err_len, "%s: not a regular file", path);
        close(fd);
        return 0;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) die("%s: fdopen: %s", path, strerror(errno));
    size_t start = len + sep, end = start;
    for (;;) {
        if (*capacity < end + 65536) {
            *capacity = *capacity * 2 + end + 65536;
            *text = grow(*text, *capacity);
        }
        size_t got = fread(*text + end, 1, *capacity - end, f);
        end += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        set_error(err, err_len, "%s: read error", path);
        return 0;
    }
    if (end == start) {
        set_error(err, err_len, "%s: empty file", path);
        return 0;
    }
    // this file alone: no NUL, valid UTF-8 (the messages name it)
    Corpus one;
    if (!corpus_from_text(&one, *text + start, end - start, path, 0.0, err, err_len)) return 0;
    corpus_free(&one);
    return end - start;
}

// Whether an item of --data is a pattern (/usr/include/*.h): it holds one
// of glob's special characters and names no file itself.
static int is_pattern(const char *item) {
    struct stat st;
    return strpbrk(item, "*?[") && stat(item, &st) != 0;
}

// One item of a comma-separated --data: a path (add_path), or a pattern
// whose matches, sorted, are each one (hidden files match only a pattern
// that names the dot). With skipped, an item that exists but is not a
// regular file or folder is skipped and named.
static int add_item(PathList *list, const char *item, SkippedFiles *skipped, char *err,
                    size_t err_len) {
    if (!is_pattern(item)) {
        int special;
        int ok = add_path(list, item, &special, err, err_len);
        if (!ok && special && skipped) {
            skip_file(skipped, item, err);
            ok = 1;
        }
        return ok;
    }
    glob_t matches;
    int status = glob(item, 0, NULL, &matches);
    if (status == GLOB_NOMATCH) {
        set_error(err, err_len, "%s: no file matches this pattern", item);
        return 0;
    }
    if (status != 0) {
        set_error(err, err_len, "%s: %s", item,
                  status == GLOB_NOSPACE ? "out of memory matching this pattern"
                                         : "a folder could not be read matching this pattern");
        return 0;
    }
    int ok = 1;
    for (size_t i = 0; ok && i < matches.gl_pathc; i++) {
        int special;
        ok = add_path(list, matches.gl_pathv[i], &special, err, err_len);
        if (!ok && special && skipped) {
            skip_file(skipped, matches.gl_pathv[i], err);
            ok = 1;
        }
    }
    globfree(&matches);
    return ok;
}

int corpus_load_files(Corpus *corpus, const char *spec, double val_fraction, SkippedFiles *skipped,
                      int *num_files, char *err, size_t err_len) {
    memset(corpus, 0, sizeof *corpus);
    *num_files = 0;
    struct stat st;
    int is_path = stat(spec, &st) == 0;
    int one_file = is_path ? !S_ISDIR(st.st_mode) : !strchr(spec, ',') && !is_pattern(spec);
    if (one_file && is_path && S_ISREG(st.st_mode) && st.st_size == 0) {
        // a file of /proc or /sys says 0 bytes and holds text: read to its end
        unsigned char *text = NULL;
        size_t capacity = 0, got = read_one_file(spec, &text, 0, 0, &capacity, err, err_len);
        if (!got && strstr(err, ": empty file")) set_error(err, err_len, "%s: empty corpus", spec);
        int ok = got > 0;
        if (ok && !(val_fraction >= 0.0 && val_fraction < 1.0)) {
            set_error(err, err_len, "%s: validation fraction %g, expected a value in [0, 1)", spec,
                      val_fraction);
            ok = 0;
        }
        if (ok) ok = corpus_from_text(corpus, text, got, spec, val_fraction, err, err_len);
        free(text);
        if (ok) *num_files = 1;
        return ok;
    }
    if (one_file) {
        *num_files = 1;
        return corpus_load(corpus, spec, val_fraction, err, err_len); // one file, as always
    }
    // every path listed (and checked) before any file is opened
    PathList list = {0};
    int ok = 1;
    if (is_path) {
        ok = add_folder(&list, spec, err, err_len);
    } else {
        char *items = copy_string(spec), *save = NULL;
        for (char *item = strtok_r(items, ",", &save); item && ok;
             item = strtok_r(NULL, ",", &save))
            ok = add_item(&list, item, skipped, err, err_len);
        free(items);
    }
    unsigned char *text = NULL;
    size_t len = 0, capacity = 0;
    int files = 0;
    for (int i = 0; ok && i < list.count; i++) {
        size_t sep = files > 0; // a newline between files
        size_t got = read_one_file(list.paths[i], &text, len, sep, &capacity, err, err_len);
        if (got) {
            if (sep) text[len] = '\n';
            len += sep + got;
            files++;
        } else if (skipped) {
            skip_file(skipped, list.paths[i], err);
        } else {
            ok = 0;
        }
    }
    if (ok && list.count == 0) {
        if (is_path) set_error(err, err_len, "%s: no file in this folder", spec);
        else set_error(err, err_len, "'%s': names no file (expected files, folders or patterns, "
                       "separated by commas)", spec);
        ok = 0;
    } else if (ok && files == 0) {
        set_error(err, err_len, "%s: no text file in it: all %d skipped (the first: %s: %s)", spec,
                  skipped ? skipped->count : 0, skipped && skipped->count ? skipped->paths[0] : "",
                  skipped && skipped->count ? skipped->reasons[0] : "");
        ok = 0;
    }
    if (ok) {
        if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
            set_error(err, err_len, "%s: validation fraction %g, expected a value in [0, 1)", spec,
                      val_fraction);
            ok = 0;
        } else {
            ok = corpus_from_text(corpus, text, len, spec, val_fraction, err, err_len);
        }
    }
    if (ok) *num_files = files;
    free(text);
    path_list_free(&list);
    return ok;
}
