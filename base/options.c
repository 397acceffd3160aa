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

// Decimal notation: an optional sign, digits with at most one point (a
// digit on one side of it), an optional exponent; for an integer type,
// digits alone. strtod would also take hex ("0x1"), "inf", "nan" and
// leading spaces.
static int is_decimal(const char *text, int integer) {
    const char *p = text;
    if (*p == '+' || *p == '-') p++;
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (integer) return digits > 0 && !*p;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    return !*p;
}

static int parse_number(const Option *opt, const char *text, char *err, size_t err_len) {
    char *end = NULL;
    errno = 0;
    double x;
    if (opt->type == OPT_U64) {
        if (text[0] == '-' || !is_decimal(text, 1)) goto bad;
        unsigned long long u = strtoull(text, &end, 10);
        if (errno || end == text || *end) goto bad;
        *(unsigned long long *)opt->value = u;
        return 1;
    }
    if (!is_decimal(text, 0)) goto bad;
    x = strtod(text, &end);
    if (errno == ERANGE && x == 0) errno = 0; // underflow: refused below, by name
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
    // Nor may a value that is not 0 become 0 (or lose its precision) as a float.
    if (opt->type == OPT_FLOAT && x != 0 && fabs(x) < FLT_MIN) {
        set_error(err, err_len, "%s: %s is too close to 0 for a float (0, or at least %g)",
                  opt->name, text, (double)FLT_MIN);
        return 0;
    }
    if (opt->type == OPT_INT)
        *(int *)opt->value = (int)x;
    else
        *(float *)opt->value = (float)x;
    return 1;
bad:
    set_error(err, err_len, "%s: '%s' is not a %s%s", opt->name, text,
              opt->type == OPT_U64 ? "non-negative integer" : "number",
              strpbrk(text, "xX") ? " (write it in decimal)" : "");
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

// Edits (insertions, deletions, substitutions, swaps of neighbours) that
// turn a[0..la) into b[0..lb), counted up to 9.
static int edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    if (la > 64 || lb > 64) return 9;
    int d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb] < 9 ? d[la][lb] : 9;
}

// The known flag closest to name[0..len): within 2 edits and fewer than
// half its letters; NULL when none is, or two are as close.
static const char *closest_flag(const Option *options, int num_options, const char *name,
                                size_t len) {
    const char *best = NULL;
    int best_distance = 3, tie = 0;
    size_t letters = len;
    while (letters > 0 && name[len - letters] == '-') letters--;
    for (int j = 0; j < num_options; j++) {
        int d = edit_distance(name, len, options[j].name, strlen(options[j].name));
        if (d < best_distance) best = options[j].name, best_distance = d, tie = 0;
        else if (d == best_distance) tie = 1;
    }
    if (!best || tie || 2 * (size_t)best_distance >= letters) return NULL;
    return best;
}

int options_parse_flags(Option *options, int num_options, int num_flags, char **flags, char *err,
                        size_t err_len) {
    const Option *last_flag = NULL; // the argument before, when a flag without a value
    for (int i = 0; i < num_flags; i++) {
        const char *arg = flags[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return OPTIONS_HELP;
        if (arg[0] != '-') {
            if (last_flag)
                set_error(err, err_len, "unexpected argument '%s': %s before it takes no value "
                          "(%s: %s)", arg, last_flag->name, last_flag->name, last_flag->help);
            else
                set_error(err, err_len, "unexpected argument '%s' (flags start with --)", arg);
            return 0;
        }
        last_flag = NULL;
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        Option *opt = NULL;
        for (int j = 0; j < num_options; j++)
            if (strlen(options[j].name) == name_len && !strncmp(options[j].name, arg, name_len))
                opt = &options[j];
        if (!opt) {
            const char *near = closest_flag(options, num_options, arg, name_len);
            if (near)
                set_error(err, err_len, "unknown flag '%.*s': did you mean %s?", (int)name_len, arg,
                          near);
            else
                set_error(err, err_len, "unknown flag '%.*s'", (int)name_len, arg);
            return 0;
        }
        opt->given = opt->name;
        if (opt->type == OPT_FLAG) {
            if (eq) {
                set_error(err, err_len, "%s takes no value", opt->name);
                return 0;
            }
            *(int *)opt->value = 1;
            last_flag = opt;
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
        opt->given = text;
        if (!option_set_text(opt, text, err, err_len)) return 0;
    }
    return 1;
}

int choice_in(const char *names, const char *name) {
    size_t len = strlen(name);
    int index = 0;
    for (const char *at = names;; index++) {
        const char *bar = strchr(at, '|');
        size_t n = bar ? (size_t)(bar - at) : strlen(at);
        if (n == len && !strncmp(at, name, len)) return index;
        if (!bar) return -1;
        at = bar + 1;
    }
}

const char *choice_name(const char *names, int index, char *out, size_t len) {
    const char *at = names;
    for (int i = 0; i < index && at; i++) {
        at = strchr(at, '|');
        if (at) at++;
    }
    const char *bar = at ? strchr(at, '|') : NULL;
    snprintf(out, len, "%.*s", at ? (int)(bar ? bar - at : (long)strlen(at)) : 0, at ? at : "");
    return out;
}

void choice_list(const char *names, const char *quote, char *out, size_t len) {
    int count = 1;
    for (const char *at = names; (at = strchr(at, '|')); at++) count++;
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < count && used < len; i++) {
        char name[128];
        choice_name(names, i, name, sizeof name);
        used += (size_t)snprintf(out + used, len - used, "%s%s%s%s",
                                 i == 0 ? "" : i == count - 1 ? " or " : ", ", quote, name, quote);
    }
}

int option_set_text(Option *opt, const char *text, char *err, size_t err_len) {
    if (opt->type == OPT_CHOICE) {
        int i = choice_in(opt->meta, text);
        if (i < 0) {
            char choices[256];
            choice_list(opt->meta, "", choices, sizeof choices);
            set_error(err, err_len, "%s %s: expected %s", opt->name, text, choices);
            return 0;
        }
        *(int *)opt->value = i;
        return 1;
    }
    if (opt->type == OPT_FLAG) {
        set_error(err, err_len, "%s takes no value", opt->name);
        return 0;
    }
    if (opt->type != OPT_STRING) return parse_number(opt, text, err, err_len);
    if (!*text) {
        set_error(err, err_len, "%s: empty value", opt->name);
        return 0;
    }
    *(const char **)opt->value = text;
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
    case OPT_CHOICE: choice_name(opt->meta, *(int *)opt->value, buf, buf_len); break;
    }
}

const char *options_value_text(const Option *opt, char *buf, size_t buf_len) {
    if (opt->given && opt->type != OPT_FLAG) snprintf(buf, buf_len, "%s", opt->given);
    else options_format_value(opt, buf, buf_len);
    return buf;
}

// "--layers N", "--resume": an option as --help's left column shows it.
static void usage_left(const Option *opt, char *buf, size_t buf_len) {
    if (opt->type == OPT_FLAG || !opt->meta) snprintf(buf, buf_len, "%s", opt->name);
    else snprintf(buf, buf_len, "%s %s", opt->name, opt->meta);
}

static int usage_width(const Option *options, int num_options) {
    int width = 20;
    char left[128];
    for (int i = 0; i < num_options; i++) {
        usage_left(&options[i], left, sizeof left);
        if ((int)strlen(left) > width) width = (int)strlen(left);
    }
    return width;
}

static void usage_line_of(FILE *out, const Option *opt, int width) {
    char left[128];
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

void options_usage(FILE *out, const char *usage_line, const Option *options, int num_options) {
    fprintf(out, "%s\n\n", usage_line);
    int width = usage_width(options, num_options);
    for (int i = 0; i < num_options; i++) usage_line_of(out, &options[i], width);
    fprintf(out, "  %-*s  %s\n", width, "--help", "print this help and exit");
}

static int group_names(const OptionGroup *group, const char *name) {
    for (const char *const *n = group->names; *n; n++)
        if (!strcmp(*n, name)) return 1;
    return 0;
}

void options_usage_grouped(FILE *out, const char *usage_line, const Option *options,
                           int num_options, const OptionGroup *groups, int num_groups) {
    fprintf(out, "%s\n", usage_line);
    int width = usage_width(options, num_options);
    for (int g = 0; g <= num_groups; g++) {
        int shown = 0;
        for (const char *const *n = g < num_groups ? groups[g].names : NULL; n && *n; n++)
            for (int i = 0; i < num_options; i++)
                if (!strcmp(options[i].name, *n)) {
                    if (!shown++) fprintf(out, "\n%s:\n", groups[g].title);
                    usage_line_of(out, &options[i], width);
                }
        if (g < num_groups) continue;
        for (int i = 0; i < num_options; i++) { // the flags no group names
            int named = 0;
            for (int k = 0; k < num_groups; k++) named |= group_names(&groups[k], options[i].name);
            if (named) continue;
            if (!shown++) fprintf(out, "\nother:\n");
            usage_line_of(out, &options[i], width);
        }
    }
    fprintf(out, "\n  %-*s  %s\n", width, "--help", "print this help and exit");
}

void options_parse_or_exit(Option *options, const Option *defaults, int num_options,
                           const char *usage_line, const OptionGroup *groups, int num_groups,
                           int argc, char **argv) {
    char err[2048];
    int parsed = options_parse(options, num_options, argc, argv, err, sizeof err);
    if (parsed == OPTIONS_HELP) {
        if (groups) options_usage_grouped(stdout, usage_line, defaults, num_options, groups, num_groups);
        else options_usage(stdout, usage_line, defaults, num_options);
        exit(0);
    }
    if (!parsed) usage_error("%s", err);
}

Option *option_named(Option *options, int num_options, const char *name) {
    for (int i = 0; i < num_options; i++)
        if (!strcmp(options[i].name, name)) return &options[i];
    return NULL;
}

int option_given(const Option *options, int num_options, const char *name) {
    for (int i = 0; i < num_options; i++)
        if (!strcmp(options[i].name, name)) return options[i].given != NULL;
    return 0;
}
