// scores.c: a model's head scores, and the scores as a table and a CSV file.
#include "scores.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/util.h"
#include "../interpret/induction_measures.h"

void model_head_scores(GPT *model, const int *ids, int T, HeadScores *scores) {
    attention_head_scores(model, ids, T, scores);
    weight_head_scores(model, NAN, scores, NULL);
}

void scores_print_table(FILE *out, const HeadScores *scores, int layers, int heads) {
    fprintf(out, "head scores, each with its baseline in brackets (uniform attention's value; "
                 "random weights' for copy and kcomp):\n");
    fprintf(out, "layer head");
    for (int k = 0; k < NUM_SCORES; k++) fprintf(out, " %15s", score_tag(k));
    fprintf(out, "  type\n");
    for (int h = 0; h < layers * heads; h++) {
        fprintf(out, "%5d %4d", h / heads, h % heads);
        for (int k = 0; k < NUM_SCORES; k++) {
            const char *fmt = k == SCORE_DISTANCE ? " %6.2f (%6.2f)" : " %6.3f (%6.3f)";
            if (isnan(scores[h].value[k])) fprintf(out, " %15s", "-");
            else fprintf(out, fmt, scores[h].value[k], scores[h].uniform[k]);
        }
        int type = head_dominant_type(&scores[h]);
        fprintf(out, "  %s\n", type >= 0 ? score_tag(type) : "-");
    }
}

void weight_head_scores(const GPT *model, double k_random, HeadScores *scores, double *k_table) {
    int L = model->config.layers, NH = model->config.heads, C = model->config.dim, H = L * NH;
    double random = L < 2 ? NAN : isnan(k_random) ? k_composition_random(C, C / NH) : k_random;
    double *table = k_table ? k_table : xmalloc(sizeof(double) * H * H);
    k_composition_table(model, table);
    for (int to = 0; to < H; to++) {
        HeadScores *s = &scores[to];
        s->value[SCORE_COPYING] = head_copying_score(model, to / NH, to % NH);
        s->uniform[SCORE_COPYING] = 0.0;
        s->value[SCORE_K_COMPOSITION] = NAN;
        s->uniform[SCORE_K_COMPOSITION] = to / NH > 0 ? random : NAN;
        for (int from = 0; from < H; from++) {
            double k = table[(size_t)from * H + to];
            if (!isnan(k) && !(k <= s->value[SCORE_K_COMPOSITION])) s->value[SCORE_K_COMPOSITION] = k;
        }
    }
    if (table != k_table) free(table);
}

void scores_write_csv_header(FILE *out, const char *prefix) {
    fprintf(out, "%slayer,head", prefix);
    for (int k = 0; k < NUM_SCORES; k++)
        fprintf(out, ",%s,%s_%s", score_name(k), score_name(k), score_baseline(k));
    fprintf(out, ",dominant\n");
}

void scores_write_csv_rows(FILE *out, const char *prefix, const HeadScores *scores, int layers,
                           int heads) {
    for (int h = 0; h < layers * heads; h++) {
        fprintf(out, "%s%d,%d", prefix, h / heads, h % heads);
        for (int k = 0; k < NUM_SCORES; k++) {
            if (isnan(scores[h].value[k])) fprintf(out, ",,");
            else fprintf(out, ",%.6f,%.6f", scores[h].value[k], scores[h].uniform[k]);
        }
        int type = head_dominant_type(&scores[h]);
        fprintf(out, ",%s\n", type >= 0 ? score_tag(type) : "");
    }
}

int scores_write_csv(const char *path, const HeadScores *scores, int layers, int heads,
                     char *err, size_t err_len) {
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) return 0;
    scores_write_csv_header(af.file, "");
    scores_write_csv_rows(af.file, "", scores, layers, heads);
    if (ferror(af.file)) atomic_file_write_failed(&af);
    return atomic_file_commit(&af, err, err_len);
}
