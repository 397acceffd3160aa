// loss_plot.c: OUT/loss.png from OUT/log.csv (loss_plot.h).
#include "loss_plot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../viz/plot.h"

void loss_plot_title(const RunPaths *paths, const TrainOptions *o, char *title, size_t len) {
    char length[64];
    if (o->minutes > 0) snprintf(length, sizeof length, "a %g-minute budget", (double)o->minutes);
    else snprintf(length, sizeof length, "%d steps", o->iters);
    snprintf(title, len, "loss: %.60s (%d layer%s, %d head%s, dim %d, context %d; %s on %.60s)",
             paths->out, o->layers, o->layers == 1 ? "" : "s", o->heads, o->heads == 1 ? "" : "s",
             o->dim, o->context, length, o->data);
}

void write_loss_plot(const RunPaths *paths, const TrainOptions *o, long tokens_per_step) {
    FILE *f = fopen(paths->log_path, "r");
    if (!f) return;
    // rows: step,train_loss,val_loss,lr,ms_per_iter,tokens_per_s (val_loss
    // empty except at evaluations)
    int capacity = 1024, n = 0, nv = 0;
    long *steps = malloc(sizeof(long) * capacity), *val_steps = malloc(sizeof(long) * capacity);
    float *train = malloc(sizeof(float) * capacity), *lr = malloc(sizeof(float) * capacity);
    float *val = malloc(sizeof(float) * capacity);
    char row[512];
    int ok = steps && val_steps && train && lr && val;
    while (ok && fgets(row, sizeof row, f)) {
        long step;
        float loss, rate, val_loss;
        char *end;
        step = strtol(row, &end, 10);
        if (end == row || *end != ',') continue; // the header
        loss = strtof(end + 1, &end);
        if (*end != ',') continue;
        char *val_text = end + 1;
        val_loss = strtof(val_text, &end);
        int has_val = end != val_text;
        if (*end != ',') continue;
        rate = strtof(end + 1, NULL);
        if (n == capacity || nv == capacity) {
            capacity *= 2;
            long *s2 = realloc(steps, sizeof(long) * capacity);
            if (s2) steps = s2;
            long *v2 = realloc(val_steps, sizeof(long) * capacity);
            if (v2) val_steps = v2;
            float *t2 = realloc(train, sizeof(float) * capacity);
            if (t2) train = t2;
            float *l2 = realloc(lr, sizeof(float) * capacity);
            if (l2) lr = l2;
            float *w2 = realloc(val, sizeof(float) * capacity);
            if (w2) val = w2;
            ok = s2 && v2 && t2 && l2 && w2;
            if (!ok) break;
        }
        steps[n] = step, train[n] = loss, lr[n++] = rate;
        if (has_val) val_steps[nv] = step, val[nv++] = val_loss;
    }
    fclose(f);
    if (ok) {
        char path[4200], title[4200], err[1024];
        snprintf(path, sizeof path, "%s/loss.png", paths->out);
        loss_plot_title(paths, o, title, sizeof title);
        LossHistory h = {steps, train, lr, n, val_steps, val, nv, tokens_per_step, title};
        if (!loss_plot_write(path, &h, err, sizeof err))
            fprintf(stderr, "warning: loss plot not written: %s\n", err);
    }
    free(steps), free(val_steps), free(train), free(lr), free(val);
}
