// base64.h: bytes as base64 text (RFC 4648's alphabet, '=' padding), how
// the pages carry binary data (weights, attention) inside HTML.
#ifndef BASE64_H
#define BASE64_H

#include <stddef.h>
#include <stdio.h>

// Write len bytes as base64 to out (4 characters for every 3 bytes).
void base64_write(FILE *out, const void *bytes, size_t len);

#endif
