// options.h: the one command-line parser, driven by a table of options.
// Every program lists its flags once (name, what the value is, type, where
// the value goes, help, allowed range); the same table parses argv, prints
// --help with each default, and reports bad input as one line.
#ifndef OPTIONS_H
#define OPTIONS_H

#include <stddef.h>
#include <stdio.h>

// OPT_CHOICE: one of the names its meta lists, "layernorm|rmsnorm", kept as
// its index (an int).
typedef enum { OPT_INT, OPT_FLOAT, OPT_U64, OPT_STRING, OPT_FLAG, OPT_CHOICE } OptionType;

typedef struct {
    const char *name;   // "--layers" (also accepted as "--layers=4")
    const char *meta;   // the value as --help names it: "N", "FILE", "fp32|bf16" (NULL for a flag)
    OptionType type;
    void *value;        // int*, float*, unsigned long long*, const char**, int* (flag, choice)
    const char *help;
    double min, max;    // inclusive range for numbers (ignored if min > max)
    const char *given;  // NULL until options_parse sees the flag; then its value as given
                        // ("10080.001", what messages quote), or its name for a flag
} Option;

#define OPTIONS_HELP (-1)

// Parse argv[1..] into the table. Returns 1 on success, OPTIONS_HELP for
// --help / -h, 0 on a usage error (unknown flag, missing or non-numeric
// value, value out of range, stray argument) with a one-line message in err.
// Numbers are decimal ("1", "-0.5", "1e-3"; not "0x1", " 1" or "1e999"), and
// a float value that is not 0 must not round to 0 or below FLT_MIN. An
// unknown flag names the closest known one ("did you mean --minutes?"); a
// stray argument after a flag that takes no value says so.
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

// The flags under headings: each group a title and its flags' names (NULL
// after the last), shown in the group's order; a flag of the table that no
// group names comes last, under "other".
typedef struct {
    const char *title;
    const char *const *names;
} OptionGroup;
void options_usage_grouped(FILE *out, const char *usage_line, const Option *options,
                           int num_options, const OptionGroup *groups, int num_groups);

// options_parse, and what every program does with its answer: --help
// prints usage_line and the flags of defaults (the same table filled from
// the defaults, so that --help shows them) and exits 0, under groups'
// headings when groups is not NULL; a usage error prints its one line and
// exits 2 (usage_error).
void options_parse_or_exit(Option *options, const Option *defaults, int num_options,
                           const char *usage_line, const OptionGroup *groups, int num_groups,
                           int argc, char **argv);

// The option called name ("--rope-base") in the table, or NULL.
Option *option_named(Option *options, int num_options, const char *name);
// Whether the flag called name was given (on the command line, or among a
// resumed run's saved flags).
int option_given(const Option *options, int num_options, const char *name);

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

// Set an option's value from text as the command line would, without
// marking it given (a recipe's setting). Returns 0 with a message in err
// when the text is not a value of the option.
int option_set_text(Option *option, const char *text, char *err, size_t err_len);
// The index of name among names joined by '|' ("layernorm|rmsnorm"), or -1.
int choice_in(const char *names, const char *name);
// Name `index` of names joined by '|', into out (empty where there is none).
const char *choice_name(const char *names, int index, char *out, size_t len);
// Names joined by '|' as "a, b or c" (quoted with quote: "\"a\", ..."), into out.
void choice_list(const char *names, const char *quote, char *out, size_t len);
// Format an option's current value ("4", "0.001", "data/x.txt", "on").
void options_format_value(const Option *option, char *buf, size_t buf_len);
// The value as the user gave it ("10080.001", not the float's "10080"), or,
// when it was not given, as options_format_value formats it. Returns buf.
const char *options_value_text(const Option *option, char *buf, size_t buf_len);

#endif
