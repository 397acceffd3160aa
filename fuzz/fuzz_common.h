// fuzz_common.h: the input as a file. The loaders take a path, so each input
// is written to one in-memory file (memfd) and opened as /proc/self/fd/N:
// the code under test is exactly what the programs run, with no disk I/O.
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((unused)) static const char *fuzz_input_path(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_input", 0);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("fuzz input");
        abort();
    }
    return path;
}

// An error message must be a non-empty NUL-terminated string; one line
// (no control characters) when it quotes a file's bytes rather than the
// user's own command line.
__attribute__((unused)) static void fuzz_check_message(const char *err, size_t err_len,
                                                       int printable) {
    size_t n = 0;
    while (n < err_len && err[n]) n++;
    if (n == err_len || n == 0) abort();
    for (size_t i = 0; i < n && printable; i++)
        if ((unsigned char)err[i] < 0x20 || err[i] == 0x7F) abort();
}

#endif
