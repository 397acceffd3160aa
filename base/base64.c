// base64.c: base64_write (base64.h).
#include "base64.h"

void base64_write(FILE *out, const void *data, size_t len) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *bytes = data;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)bytes[i] << 16;
        if (i + 1 < len) v |= (unsigned)bytes[i + 1] << 8;
        if (i + 2 < len) v |= bytes[i + 2];
        char quad[4] = {digits[(v >> 18) & 63], digits[(v >> 12) & 63],
                        i + 1 < len ? digits[(v >> 6) & 63] : '=', i + 2 < len ? digits[v & 63] : '='};
        fwrite(quad, 1, 4, out);
    }
}
