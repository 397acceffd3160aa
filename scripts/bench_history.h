// bench_history.h: the history file of bin/bench and bin/bench_sample
// (--history FILE --commit HASH; `make bench` passes both): one CSV row per
// headline figure, docs/bench_history.csv's columns.
#ifndef BENCH_HISTORY_H
#define BENCH_HISTORY_H

typedef struct {
    const char *path, *commit; // path NULL: no rows written
    char date[32];             // of the run (its first row), UTC: 2026-11-25T23:40Z
} BenchHistory;
extern BenchHistory bench_history; // the program's options set path and commit

// Appends date,commit,cpu,benchmark,shape,precision,threads,metric,value to
// the history's path (the header first if the file is new), the value with
// `decimals` decimals. cpu is /proc/cpuinfo's model name, its commas made
// spaces so that it stays one field, or "unknown".
void history_append(const char *benchmark, const char *shape, const char *precision,
                    int threads, const char *metric, double value, int decimals);

#endif
