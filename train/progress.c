// progress.c: the progress line, log.csv rows, evaluation, samples and
// heatmaps of a training run (see progress.h).
#include "progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/files.h"
#include "../base/options.h"
#include "../base/util.h"
#include "../viz/atlas.h"
#include "../viz/heatmap.h"
#include "distributed.h"

float evaluate(GPT *model, Split split, int B, int T, int batches, Batch *batch, int rows) {
    int rank = distributed_rank(), procs = distributed_size();
    double *batch_loss = xcalloc((size_t)batches, sizeof(double));
    for (int i = rank; i < batches; i += procs) {
        batch_eval(split, B, T, i, batches, batch->inputs, batch->targets);
        // gpt_forward's mean loss over the whole batch, a part at a time:
        // the same double sum over positions, in the same order.
        double sum = 0.0;
        for (int row = 0; row < B; row += rows) {
            size_t offset = (size_t)row * T;
            gpt_forward(model, batch->inputs + offset, rows, T,
                        (ForwardArgs){.targets = batch->targets + offset,
                                      .attention = ATTENTION_FUSED});
            for (int n = 0; n < rows * T; n++) sum += model->acts.losses[n];
        }
        batch_loss[i] = (float)(sum / ((double)B * T));
    }
    distributed_sum_disjoint(batch_loss, (size_t)batches);
    double total = 0.0;
    for (int i = 0; i < batches; i++) total += batch_loss[i];
    free(batch_loss);
    return (float)(total / batches);
}

void progress_add_step(ProgressWindow *window, double seconds, float loss) {
    window->seconds += seconds;
    window->loss_sum += loss;
    window->steps++;
}

void print_live_progress(const ProgressWindow *w, long step, int iters, float loss, float lr,
                         int tokens_per_step) {
    char total[32] = "?", eta[32] = "?";
    if (iters > 0) {
        snprintf(total, sizeof total, "%d", iters);
        snprintf(eta, sizeof eta, "%.0f s", (iters - step) * (w->seconds / w->steps));
    }
    printf("\rstep %ld/%s  loss %.4f  lr %.2e  %.1f ms/iter  %.0f tokens/s  ETA %s   ", step,
           total, loss, lr, 1e3 * w->seconds / w->steps, tokens_per_step * w->steps / w->seconds,
           eta);
    fflush(stdout);
}

float log_window(ProgressWindow *w, FILE *log, long step, int iters, float lr,
                 int tokens_per_step, int print_line, int write_row, float *tokens_per_s) {
    float ms_per_iter = (float)(1e3 * w->seconds / w->steps);
    *tokens_per_s = (float)(tokens_per_step * w->steps / w->seconds);
    float mean_loss = (float)(w->loss_sum / w->steps);
    if (print_line) {
        char total[32] = "?";
        if (iters > 0) snprintf(total, sizeof total, "%d", iters);
        printf("step %ld/%s  loss %.4f  lr %.2e  %.1f ms/iter  %.0f tokens/s\n", step, total,
               mean_loss, lr, ms_per_iter, *tokens_per_s);
    }
    if (write_row)
        fprintf(log, "%ld,%.6f,,%.6g,%.3f,%.1f\n", step, mean_loss, lr, ms_per_iter,
                *tokens_per_s);
    memset(w, 0, sizeof *w);
    return ms_per_iter;
}

void log_eval_row(FILE *log, long step, float train_loss, float val_loss, float lr,
                  float ms_per_iter, float tokens_per_s) {
    fprintf(log, "%ld,%.6f,%.6f,%.6g,%.3f,%.1f\n", step, train_loss, val_loss, lr, ms_per_iter,
            tokens_per_s);
}

void print_sample(KVCache *cache, Sampler *sampler, const Vocab *vocab, int chars) {
    if (chars <= 0) return;
    kv_cache_reset(cache);
    rng_seed(&sampler->rng, 42); // the same draws every time: only the model changes
    int newline = vocab_id(vocab, '\n');
    const float *logits = kv_cache_step(cache, newline >= 0 ? newline : 0);
    printf("---\n");
    for (int i = 0; i < chars; i++) {
        int next = sampler_sample(sampler, logits);
        char bytes[4];
        fwrite(bytes, 1, utf8_encode(vocab->code_points[next], bytes), stdout);
        if (i + 1 < chars) logits = kv_cache_step(cache, next);
    }
    printf("\n---\n");
}

void make_probe(Probe *probe, const char *text, const Corpus *corpus, int context) {
    probe->ids = xcalloc(context, sizeof(int));
    probe->chars = xcalloc(context, sizeof(uint32_t));
    probe->len = 0;
    if (!text) {
        Split val = corpus_val(corpus);
        probe->len = (int)(val.len < (size_t)context ? val.len : (size_t)context);
        for (int i = 0; i < probe->len; i++) probe->ids[i] = val.tokens[i];
    } else {
        EncodedText encoded;
        char err[1024];
        if (!vocab_encode_text(&corpus->vocab, "--probe", text, strlen(text), &encoded, err,
                               sizeof err))
            usage_error("%s", err);
        if (encoded.unknown) {
            vocab_unknown_message(&encoded, "--probe", err, sizeof err);
            die("%s", err);
        }
        if (encoded.num_ids > context)
            usage_error("--probe: %d characters, longer than the context (%d): the heatmaps show "
                        "one window; give at most %d", encoded.num_ids, context, context);
        if (encoded.num_ids < 1) usage_error("--probe: empty text");
        for (int i = 0; i < encoded.num_ids; i++) probe->ids[probe->len++] = encoded.ids[i];
        encoded_text_free(&encoded);
    }
    for (int i = 0; i < probe->len; i++) probe->chars[i] = corpus->vocab.code_points[probe->ids[i]];
    probe->code_points = corpus->vocab.code_points;
    probe->context = context;
    probe->icl_inputs = xmalloc(sizeof(int) * 2 * ICL_WINDOWS * context);
    probe->icl_targets = probe->icl_inputs + ICL_WINDOWS * context;
    probe->position_loss = xmalloc(sizeof(double) * context);
    probe->k_random = NAN; // the caller's, when it knows the model's shape
    batch_eval(corpus_val(corpus), ICL_WINDOWS, context, 0, 1, probe->icl_inputs, probe->icl_targets);
}

void free_probe(Probe *probe) {
    free(probe->ids);
    free(probe->chars);
    free(probe->icl_inputs);
    free(probe->position_loss);
    memset(probe, 0, sizeof *probe);
}

// The mean loss at each position over the probe's validation windows,
// model->batch_size windows a forward, summed in window order.
static void measure_position_loss(GPT *model, const Probe *probe) {
    int T = probe->context, rows = model->batch_size;
    double *sum = probe->position_loss;
    for (int t = 0; t < T; t++) sum[t] = 0;
    for (int w = 0; w < ICL_WINDOWS; w += rows) {
        int n = ICL_WINDOWS - w < rows ? ICL_WINDOWS - w : rows;
        gpt_forward(model, probe->icl_inputs + (size_t)w * T, n, T,
                    (ForwardArgs){.targets = probe->icl_targets + (size_t)w * T,
                                  .attention = ATTENTION_FUSED});
        for (int r = 0; r < n; r++)
            for (int t = 0; t < T; t++) sum[t] += model->acts.losses[(size_t)r * T + t];
    }
    for (int t = 0; t < T; t++) sum[t] /= ICL_WINDOWS;
}

// Bytes of the regular files under dir, at any depth, or in dir alone.
static double folder_bytes(const char *dir, int top_only) {
    FileList files;
    folder_listing(dir, "", &files);
    double bytes = 0;
    for (int i = 0; i < files.count; i++)
        if (!top_only || !strchr(files.entries[i].path, '/')) bytes += (double)files.entries[i].size;
    file_list_free(&files);
    return bytes;
}

// "840 kB", "1.1 MB": bytes as a size a reader takes in.
static void format_bytes(double bytes, char *out, size_t len) {
    if (bytes < 1e6) snprintf(out, len, "%.0f kB", bytes / 1e3);
    else snprintf(out, len, "%.1f MB", bytes / 1e6);
}

// Once, after the first snapshot this process wrote: where the snapshots
// go and what each costs on disk, so that a long run's total is no surprise.
static void say_where_snapshots_go(const char *out, const char *dir, long step) {
    static int said;
    if (said++) return;
    char attn[4200], one[32], beside[32];
    snprintf(attn, sizeof attn, "%s/attn", out);
    format_bytes(folder_bytes(dir, 0), one, sizeof one);
    format_bytes(folder_bytes(attn, 1), beside, sizeof beside);
    printf("%ssnapshots: into %s/, a folder each (step_%ld/: %s), beside them the timeline, "
           "filmstrips and scores.csv (%s)\n", isatty(STDOUT_FILENO) ? "\n" : "", attn, step, one,
           beside);
    fflush(stdout);
}

void write_heatmaps(GPT *model, Probe *probe, const char *out, long step) {
    char dir[4200], err[1024];
    snprintf(dir, sizeof dir, "%s/attn/step_%ld", out, step);
    float loss = model->mean_loss; // this step's training batch, before the probe forward
    measure_position_loss(model, probe);
    gpt_forward(model, probe->ids, 1, probe->len, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    HeatmapOptions opts = heatmap_default_options();
    double start = now_seconds();
    int redraw = !probe->drawn || start - probe->drawn_at >= PICTURES_SPACING * probe->draw_seconds;
    SnapshotInput in = {probe->chars, probe->len, probe->code_points, step, loss,
                        probe->position_loss, probe->context, probe->k_random, redraw};
    if (!heatmaps_write(dir, model, probe->chars, probe->len, &opts, err, sizeof err)) {
        fprintf(stderr, "warning: heatmaps not written: %s\n", err);
        return;
    }
    double atlas_start = now_seconds();
    if (!atlas_snapshot(out, model, &in, err, sizeof err)) {
        fprintf(stderr, "warning: atlas snapshot not written: %s\n", err);
        return;
    }
    probe->stale = !redraw;
    if (redraw) {
        probe->drawn = 1;
        probe->drawn_at = now_seconds();
        probe->draw_seconds = probe->drawn_at - atlas_start;
    }
    say_where_snapshots_go(out, dir, step);
}

void finish_heatmaps(const GPT *model, Probe *probe, const char *out) {
    char err[1024];
    if (!probe->stale) return;
    if (!atlas_redraw(out, model->config.layers, model->config.heads, err, sizeof err))
        fprintf(stderr, "warning: atlas pictures not redrawn: %s\n", err);
    probe->stale = 0;
}
