// options.c: the table-driven command-line parser (see options.h).
#include "options.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int parse_number(const Option *opt, const char *text, char *err, size_t err_len) {
    char *end = NULL;
    errno = 0;
    double x;
    if (opt->type == OPT_U64) {
        if (text[0] == '-') goto bad;
        unsigned long long u = strtoull(text, &end, 10);
        if (errno || end == text || *end) goto bad;
        *(unsigned long long *)opt->value = u;
        return 1;
    }
    x = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(x)) goto bad;
    if (opt->type == OPT_INT && (x != floor(x) || strpbrk(text, ".eE"))) {
        set_error(err, err_len, "%s: '%s' is not an integer", opt->name, text);
        return 0;
    }
    if (opt->min <= opt->max && (x < opt->min || x > opt->max)) {
        set_error(err, err_len, "%s: %s is out of range [%g, %g]", opt->name, text, opt->min,
                  opt->max);
        return 0;
    }
    // An option without a range still gets only what its type can hold
    // (converting anything else to int or float is undefined behaviour).
    double type_max = opt->type == OPT_INT ? (double)INT_MAX : (double)FLT_MAX;
    double type_min = opt->type == OPT_INT ? (double)INT_MIN : -(double)FLT_MAX;
    if (x < type_min || x > type_max) {
        set_error(err, err_len, "%s: %s is out of range [%.10g, %.10g]", opt->name, text,
                  type_min, type_max);
        return 0;
    }
    if (opt->type == OPT_INT)
        *(int *)opt->value = (int)x;
    else
        *(float *)opt->value = (float)x;
    return 1;
bad:
    set_error(err, err_len, "%s: '%s' is not a %s", opt->name, text,
              opt->type == OPT_U64 ? "non-negative integer" : "number");
    return 0;
}

// argv[0] of the last options_parse: usage_error tells the user to run it.
static const char *program_name = "the program";

void usage_error(const char *fmt, ...) {
    char message[4096];
    va_list args;
    va_start(args, fmt);
    int len = vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    if (len >= 0 && (size_t)len < sizeof message)
        snprintf(message + len, sizeof message - len, " (run %s --help for usage)", program_name);
    fatal_exit(2, message);
}

// "a, b or c" of names[0 .. count), into out.
static void list_choices(char *out, size_t len, const char *const names[], int count) {
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < count && used < len; i++)
        used += snprintf(out + used, len - used, "%s%s", i == 0 ? "" : i == count - 1 ? " or " : ", ",
                         names[i]);
}

static int choice_index(const char *value, const char *const names[], int count) {
    for (int i = 0; i < count; i++)
        if (!strcmp(value, names[i])) return i;
    return -1;
}

int option_choice(const char *flag, const char *value, const char *const names[], int count) {
    int i = choice_index(value, names, count);
    if (i < 0) {
        char choices[256];
        list_choices(choices, sizeof choices, names, count);
        usage_error("%s %s: expected %s", flag, value, choices);
    }
    return i;
}

int env_choice(const char *variable, const char *const names[], int count, int fallback) {
    const char *value = getenv(variable);
    if (!value || !*value) return fallback;
    int i = choice_index(value, names, count);
    if (i < 0) {
        char choices[256];
        list_choices(choices, sizeof choices, names, count);
        die("%s=%s: expected %s", variable, value, choices);
    }
    return i;
}

int options_parse(Option *options, int num_options, int argc, char **argv, char *err,
                  size_t err_len) {
    if (argc < 1) return 1;
    if (argv[0]) program_name = argv[0];
    return options_parse_flags(options, num_options, argc - 1, argv + 1, err, err_len);
}

int options_parse_flags(Option *options, int num_options, int num_flags, char **flags, char *err,
                        size_t err_len) {
    for (int i = 0; i < num_flags; i++) {
        const char *arg = flags[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return OPTIONS_HELP;
        if (arg[0] != '-') {
            set_error(err, err_len, "unexpected argument '%s' (flags start with --)", arg);
            return 0;
        }
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        Option *opt = NULL;
        for (int j = 0; j < num_options; j++)
            if (strlen(options[j].name) == name_len && !strncmp(options[j].name, arg, name_len))
                opt = &options[j];
        if (!opt) {
            set_error(err, err_len, "unknown flag '%.*s' (see --help)", (int)name_len, arg);
            return 0;
        }
        opt->given = 1;
        if (opt->type == OPT_FLAG) {
            if (eq) {
                set_error(err, err_len, "%s takes no value", opt->name);
                return 0;
            }
            *(int *)opt->value = 1;
            continue;
        }
        const char *text;
        if (eq) {
            text = eq + 1;
        } else {
            if (i + 1 >= num_flags) {
                set_error(err, err_len, "%s needs a value", opt->name);
                return 0;
            }
            text = flags[++i];
        }
        if (opt->type == OPT_STRING) {
            if (!*text) {
                set_error(err, err_len, "%s: empty value", opt->name);
                return 0;
            }
            *(const char **)opt->value = text;
        } else if (!parse_number(opt, text, err, err_len)) {
            return 0;
        }
    }
    return 1;
}

void options_format_value(const Option *opt, char *buf, size_t buf_len) {
    switch (opt->type) {
    case OPT_INT: snprintf(buf, buf_len, "%d", *(int *)opt->value); break;
    case OPT_FLOAT: snprintf(buf, buf_len, "%g", (double)*(float *)opt->value); break;
    case OPT_U64: snprintf(buf, buf_len, "%llu", *(unsigned long long *)opt->value); break;
    case OPT_STRING: {
        const char *s = *(const char **)opt->value;
        snprintf(buf, buf_len, "%s", s ? s : "(none)");
        break;
    }
    case OPT_FLAG: snprintf(buf, buf_len, "%s", *(int *)opt->value ? "on" : "off"); break;
    }
}

// "--layers N", "--resume": an option as --help's left column shows it.
static void usage_left(const Option *opt, char *buf, size_t buf_len) {
    if (opt->type == OPT_FLAG || !opt->meta) snprintf(buf, buf_len, "%s", opt->name);
    else snprintf(buf, buf_len, "%s %s", opt->name, opt->meta);
}

void options_usage(FILE *out, const char *usage_line, const Option *options, int num_options) {
    fprintf(out, "%s\n\n", usage_line);
    int width = 20;
    char left[128];
    for (int i = 0; i < num_options; i++) {
        usage_left(&options[i], left, sizeof left);
        if ((int)strlen(left) > width) width = (int)strlen(left);
    }
    for (int i = 0; i < num_options; i++) {
        const Option *opt = &options[i];
        usage_left(opt, left, sizeof left);
        fprintf(out, "  %-*s  %s", width, left, opt->help);
        int unset = opt->type == OPT_STRING && !*(const char **)opt->value;
        if (opt->type != OPT_FLAG && !unset && !strstr(opt->help, "unset: ")) {
            char value[256];
            options_format_value(opt, value, sizeof value);
            fprintf(out, " (default: %s)", value);
        }
        fputc('\n', out);
    }
    fprintf(out, "  %-*s  %s\n", width, "--help", "print this help and exit");
}
