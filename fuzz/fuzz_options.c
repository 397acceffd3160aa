// fuzz_options.c: libFuzzer target for the one option parser. The input is
// an argv: arguments separated by NUL bytes. The table has every option
// type, with and without a range, like bin/train's, bin/sample's and
// bin/attn's. A bad argv must give a one-line message, never a crash or
// undefined behaviour (an int or float the value cannot hold included).
#include <string.h>

#include "../base/options.h"
#include "fuzz_common.h"

typedef struct {
    int layers, any_int, flag, layer;
    float lr, any_float;
    unsigned long long seed;
    const char *data;
} Values;

#define NUM_OPTIONS 8
#define MAX_ARGS 64

static void make_table(Values *v, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--layers", "N", OPT_INT, &v->layers, "an int with a range", 1, 1024, 0},
        {"--any-int", "N", OPT_INT, &v->any_int, "an int without a range", 0, -1, 0},
        {"--layer", "N", OPT_INT, &v->layer, "a range below zero", -1, 100000, 0},
        {"--lr", "RATE", OPT_FLOAT, &v->lr, "a float with a range", 0, 10, 0},
        {"--any-float", "X", OPT_FLOAT, &v->any_float, "a float without a range", 0, -1, 0},
        {"--seed", "N", OPT_U64, &v->seed, "a u64", 0, -1, 0},
        {"--data", "TEXT", OPT_STRING, &v->data, "a string", 0, -1, 0},
        {"--flag", NULL, OPT_FLAG, &v->flag, "a flag", 0, -1, 0},
    };
    memcpy(t, table, sizeof table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "fuzz";
    for (size_t start = 0; start <= size && argc <= MAX_ARGS; start += strlen(text + start) + 1)
        argv[argc++] = text + start;
    argv[argc] = NULL;

    Values v = {.layers = 4, .lr = 1e-3f, .seed = 1337, .data = "x"};
    Option table[NUM_OPTIONS];
    make_table(&v, table);
    char err[512];
    err[0] = '\0';
    int parsed = options_parse(table, NUM_OPTIONS, argc, argv, err, sizeof err);
    if (parsed == 1) {
        if (v.layers < 1 || v.layers > 1024 || !(v.lr >= 0 && v.lr <= 10)) abort();
        char value[256];
        for (int i = 0; i < NUM_OPTIONS; i++) options_format_value(&table[i], value, sizeof value);
    } else if (parsed == 0) {
        fuzz_check_message(err, sizeof err, 0);
    } else if (parsed != OPTIONS_HELP) {
        abort();
    }
    free(text);
    return 0;
}
