// bench_history.c: the benchmarks' history file (scripts/bench_history.h).
#include "bench_history.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../base/util.h"

BenchHistory bench_history = {.commit = "unknown"};

void history_append(const char *benchmark, const char *shape, const char *precision,
                    int threads, const char *metric, double value, int decimals) {
    BenchHistory *history = &bench_history;
    if (!history->path) return;
    if (!history->date[0]) {
        time_t now = time(NULL);
        strftime(history->date, sizeof history->date, "%Y-%m-%dT%H:%MZ", gmtime(&now));
    }
    char cpu[256] = "unknown", line[512];
    FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
    while (cpuinfo && fgets(line, sizeof line, cpuinfo))
        if (sscanf(line, "model name : %255[^\n]", cpu) == 1) break;
    if (cpuinfo) fclose(cpuinfo);
    for (char *c = cpu; *c; c++)
        if (*c == ',') *c = ' ';
    FILE *csv = fopen(history->path, "a");
    if (!csv) die("%s: cannot append a row: %s", history->path, strerror(errno));
    fseek(csv, 0, SEEK_END);
    if (ftell(csv) == 0)
        fprintf(csv, "date,commit,cpu,benchmark,shape,precision,threads,metric,value\n");
    fprintf(csv, "%s,%s,%s,%s,%s,%s,%d,%s,%.*f\n", history->date, history->commit, cpu, benchmark,
            shape, precision, threads, metric, decimals, value);
    if (fclose(csv) != 0) die("%s: cannot write: %s", history->path, strerror(errno));
}
