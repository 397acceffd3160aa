// corpus_files.c: --data as several files or a folder, joined into one
// corpus (each file checked on its own, so an error names it).
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

// A folder's regular files (not hidden ones), in sorted path order.
static int add_folder(PathList *list, const char *dir, char *err, size_t err_len) {
    DIR *d = opendir(dir);
    if (!d) {
        set_error(err, err_len, "%s: %s", dir, strerror(errno));
        return 0;
    }
    int first = list->count;
    struct dirent *entry;
    while ((entry = readdir(d))) {
        if (entry->d_name[0] == '.') continue;
        size_t len = strlen(dir) + strlen(entry->d_name) + 2;
        char *path = grow(NULL, len);
        snprintf(path, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", entry->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) path_list_add(list, path);
        free(path);
    }
    closedir(d);
    if (list->count == first) {
        set_error(err, err_len, "%s: is a directory with no files in it", dir);
        return 0;
    }
    qsort(list->paths + first, (size_t)(list->count - first), sizeof(char *), compare_paths);
    return 1;
}

static int add_path(PathList *list, const char *path, char *err, size_t err_len) {
    struct stat st;
    if (stat(path, &st) != 0) {
        set_error(err, err_len, "%s: %s", path, strerror(errno));
        return 0;
    }
    if (S_ISDIR(st.st_mode)) return add_folder(list, path, err, err_len);
    path_list_add(list, path);
    return 1;
}

// The whole file into *text at *len (grown as needed). Returns 0 with a
// message naming the file.
static int append_file(const char *path, unsigned char **text, size_t *len, size_t *capacity,
                       char *err, size_t err_len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_error(err, err_len, "%s: %s", path, strerror(errno));
        return 0;
    }
    size_t start = *len;
    for (;;) {
        if (*capacity - *len < 65536) {
            *capacity = *capacity * 2 + 65536;
            *text = grow(*text, *capacity);
        }
        size_t got = fread(*text + *len, 1, *capacity - *len, f);
        *len += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        set_error(err, err_len, "%s: read error", path);
        return 0;
    }
    if (*len == start) {
        set_error(err, err_len, "%s: empty file", path);
        return 0;
    }
    // this file alone: valid UTF-8, no NUL (the messages name it)
    Corpus one;
    char reason[512];
    if (!corpus_from_text(&one, *text + start, *len - start, path, 0.0, reason, sizeof reason)) {
        set_error(err, err_len, "%s", reason);
        return 0;
    }
    corpus_free(&one);
    return 1;
}

int corpus_load_files(Corpus *corpus, const char *spec, double val_fraction, int *num_files,
                      char *err, size_t err_len) {
    memset(corpus, 0, sizeof *corpus);
    *num_files = 0;
    struct stat st;
    int is_path = stat(spec, &st) == 0;
    if ((is_path && !S_ISDIR(st.st_mode)) || (!is_path && !strchr(spec, ','))) {
        *num_files = 1;
        return corpus_load(corpus, spec, val_fraction, err, err_len); // one file, as always
    }
    PathList list = {0};
    int ok = 1;
    if (is_path) {
        ok = add_folder(&list, spec, err, err_len);
    } else {
        char *items = copy_string(spec), *save = NULL;
        for (char *item = strtok_r(items, ",", &save); item && ok; item = strtok_r(NULL, ",", &save))
            ok = add_path(&list, item, err, err_len);
        free(items);
    }
    unsigned char *text = NULL;
    size_t len = 0, capacity = 0;
    for (int i = 0; ok && i < list.count; i++) {
        if (i > 0) {
            if (len == capacity) text = grow(text, capacity = capacity * 2 + 65536);
            text[len++] = '\n';
        }
        ok = append_file(list.paths[i], &text, &len, &capacity, err, err_len);
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
    if (ok) *num_files = list.count;
    free(text);
    path_list_free(&list);
    return ok;
}
