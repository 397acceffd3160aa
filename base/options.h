// options.h: the one command-line parser, driven by a table of options.
// Every program lists its flags once (name, what the value is, type, where
// the value goes, help, allowed range); the same table parses argv, prints
// --help with each default, and reports bad input as one line.
#ifndef OPTIONS_H
#define OPTIONS_H

#include <stddef.h>
#include <stdio.h>

typedef enum { OPT_INT, OPT_FLOAT, OPT_U64, OPT_STRING, OPT_FLAG } OptionType;

typedef struct {
    const char *name;   // "--layers" (also accepted as "--layers=4")
    const char *meta;   // the value as --help names it: "N", "FILE", "fp32|bf16" (NULL for a flag)
    OptionType type;
    void *value;        // int*, float*, unsigned long long*, const char**, int* (flag)
    const char *help;
    double min, max;    // inclusive range for numbers (ignored if min > max)
    int given;          // set by options_parse when the flag appears
} Option;

#define OPTIONS_HELP (-1)

// Parse argv[1..] into the table. Returns 1 on success, OPTIONS_HELP for
// --help / -h, 0 on a usage error (unknown flag, missing or non-numeric
// value, value out of range, stray argument) with a one-line message in err.
int options_parse(Option *options, int num_options, int argc, char **argv, char *err,
                  size_t err_len);

// The same for flags that come from somewhere other than the command line
// (a resumed run's saved ones): flags[0..num_flags), no program name before
// them, so usage_error keeps naming the program of the last options_parse.
int options_parse_flags(Option *options, int num_options, int num_flags, char **flags, char *err,
                        size_t err_len);

// Print "usage: program [options]", the summary, then every flag with its
// help and its default (the value in the table when called, so call it
// before parsing, or with a copy of the defaults). No default is shown for
// a flag, a string that is unset (NULL), or an option whose help says
// itself what leaving it unset does ("...; unset: ...").
void options_usage(FILE *out, const char *usage_line, const Option *options, int num_options);

// Print "error: <message> (run <program> --help for usage)" on one line,
// where <program> is argv[0] of the last options_parse, and exit(2).
void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

// The index of `value` among names[0 .. count), or a usage error naming
// the flag and the choices ("--precision x: expected fp32 or bf16").
int option_choice(const char *flag, const char *value, const char *const names[], int count);
// The same for the environment variable `variable`: `fallback` where it is
// unset or empty, an error (exit 1) naming it and the choices where it
// names none of them.
int env_choice(const char *variable, const char *const names[], int count, int fallback);

// Format an option's current value ("4", "0.001", "data/x.txt", "on").
void options_format_value(const Option *option, char *buf, size_t buf_len);

#endif
