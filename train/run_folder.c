// run_folder.c: checkpoints (model + optimizer state), log.csv and the
// record of what bin/train writes in the run's output folder.
#include "run_folder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/files.h"
#include "../infer/checkpoint.h"
#include "train_state.h"

void run_paths(RunPaths *paths, const char *out) {
    snprintf(paths->out, sizeof paths->out, "%s", out);
    snprintf(paths->model_path, sizeof paths->model_path, "%s/model.safetensors", out);
    snprintf(paths->state_path, sizeof paths->state_path, "%s/optimizer.safetensors", out);
    snprintf(paths->prev_state_path, sizeof paths->prev_state_path,
             "%s/optimizer.prev.safetensors", out);
    snprintf(paths->log_path, sizeof paths->log_path, "%s/log.csv", out);
}

void check_run_folder(const RunPaths *paths, int force) {
    if (force) return;
    char err[4400], first[4400], more[64] = "";
    FileList record;
    if (!written_record_read(paths->out, RUN_RECORD, &record, err, sizeof err)) die("%s", err);
    int foreign = written_record_foreign(paths->out, RUN_RECORD, &record, first, sizeof first, err,
                                         sizeof err);
    file_list_free(&record);
    if (foreign < 0) die("--out %s", err);
    if (foreign > 1) snprintf(more, sizeof more, " and %d more", foreign - 1);
    if (foreign > 0)
        die("--out %s: the folder holds files that bin/train did not write (%s%s); give a new or "
            "empty folder, or --force to write into it", paths->out, first, more);
}

void record_run_files(const RunPaths *paths, int resumed, int snapshots) {
    // what a run writes: run_paths' files, the loss plot (loss_plot.h), the
    // snapshots (progress.h)
    const char *names[] = {"log.csv", "loss.png", "model.safetensors", "optimizer.safetensors",
                           "optimizer.prev.safetensors", "attn/"};
    int count = sizeof names / sizeof names[0] - !snapshots;
    char err[4400], path[4400];
    FileList record;
    if (!written_record_read(paths->out, RUN_RECORD, &record, err, sizeof err)) die("%s", err);
    int added = 0;
    for (int i = 0; i < count; i++) {
        snprintf(path, sizeof path, "%s/%s", paths->out, names[i]);
        if (!file_list_find(&record, names[i]) && (resumed || !file_exists(path))) {
            file_list_add(&record, names[i], NULL);
            added++;
        }
    }
    if (added && !written_record_write(paths->out, RUN_RECORD, "bin/train", &record, err, sizeof err))
        die("%s", err);
    file_list_free(&record);
}

// Each file is replaced atomically, but the pair is not: a crash between
// the two renames leaves the new optimizer state beside the old model. So
// the optimizer state the current model was saved with is kept, as a hard
// link (no copy), until the new model is in place; --resume falls back to
// it. A save that keeps the model file (not the best) writes one file.
void save_checkpoint(const RunPaths *paths, const GPT *model, const Vocab *vocab,
                     const AdamW *opt, const Muon *muon, const Rng *rng, const char *options_json,
                     const BestModel *best, int model_is_best, const ProgressWindow *log_window,
                     const float *continue_from, const Average *average) {
    char err[1024], name[128];
    if (gpt_first_non_finite(model, model->params_memory, name, sizeof name)) {
        char kept[4200];
        if (file_exists(paths->model_path))
            snprintf(kept, sizeof kept, "the last checkpoint in %s is intact", paths->out);
        else snprintf(kept, sizeof kept, "%s holds no checkpoint of this run yet", paths->out);
        die("parameters are not finite after step %ld (first: %s); not saved, %s (try a lower "
            "--lr)", opt->step, name, kept);
    }
    unlink(paths->prev_state_path);
    if (model_is_best)
        link(paths->state_path, paths->prev_state_path); // fails harmlessly before the first save
    const float *last = continue_from ? continue_from : model->params_memory;
    if (!train_state_save_with_muon(paths->state_path, opt, muon, rng->state,
                                    params_hash(last, model->num_params), options_json, best,
                                    model_is_best && !continue_from ? NULL : last, average,
                                    log_window, err, sizeof err))
        die("saving optimizer state: %s", err);
    if (model_is_best && !gpt_save(paths->model_path, model, vocab, err, sizeof err))
        die("saving model: %s", err);
    unlink(paths->prev_state_path);
}

// The state in `path`, if it belongs with the model file (or holds its own
// weights to continue from, which then replace the model's, last (P) being
// scratch); 0 with a message otherwise.
static int load_matching_state(const char *path, const RunPaths *paths, GPT *model, float *last,
                               AdamW *opt, Muon *muon, OptimizerKind *saved, Rng *rng,
                               char **options_json, BestModel *best, char *err, size_t err_len) {
    uint64_t saved_hash;
    int has_last = 0;
    if (!train_state_load_with_muon(path, opt, muon, saved, &rng->state, &saved_hash, options_json,
                                    best, last, &has_last, err, err_len))
        return 0;
    const float *params = has_last ? last : model->params_memory;
    if (params_hash(params, model->num_params) == saved_hash) {
        if (has_last) memcpy(model->params_memory, last, model->num_params * sizeof(float));
        return 1;
    }
    free(*options_json);
    set_error(err, err_len, "%s and %s are from different saves (was a save interrupted?)",
              paths->model_path, path);
    return 0;
}

void load_state(const RunPaths *paths, GPT *model, AdamW *opt, Muon *muon, OptimizerKind *saved,
                Rng *rng, char **options_json, BestModel *best, ProgressWindow *log_window) {
    char err[8400], prev_err[1024];
    float *last = xmalloc(model->num_params * sizeof(float));
    int ok = load_matching_state(paths->state_path, paths, model, last, opt, muon, saved, rng,
                                 options_json, best, err, sizeof err);
    if (!ok && file_exists(paths->prev_state_path) &&
        load_matching_state(paths->prev_state_path, paths, model, last, opt, muon, saved, rng,
                            options_json, best, prev_err, sizeof prev_err)) {
        if (rename(paths->prev_state_path, paths->state_path) != 0)
            die("%s: cannot restore it as %s: %s", paths->prev_state_path, paths->state_path,
                strerror(errno));
        fprintf(stderr, "note: the last save was interrupted; resuming from the one before\n");
        ok = 1;
    }
    free(last);
    if (!ok) die("%s", err);
    if (!train_state_log_window(paths->state_path, log_window, err, sizeof err)) die("%s", err);
}

// Keep log.csv's rows up to `step` (a resumed run rewrites what came after).
// Rewritten through the one atomic file write (base/files.h), so a crash
// leaves the old log or the new one.
static void truncate_log(const char *path, long step) {
    FILE *in = fopen(path, "r");
    if (!in) return;
    AtomicFile out;
    char err[4400];
    if (!atomic_file_open(&out, path, err, sizeof err)) die("%s", err);
    char line[4096];
    int first = 1;
    while (fgets(line, sizeof line, in)) {
        // a row without its newline was cut short by a crash: drop it
        if ((first || (atol(line) <= step && strchr(line, '\n'))) && fputs(line, out.file) == EOF)
            atomic_file_write_failed(&out);
        first = 0;
    }
    fclose(in);
    if (!atomic_file_commit(&out, err, sizeof err)) die("%s", err);
}

RunLog open_log(const RunPaths *paths, int resumed, long resumed_step) {
    if (resumed) {
        truncate_log(paths->log_path, resumed_step);
    } else {
        FILE *log = fopen(paths->log_path, "w");
        if (!log) die("%s: cannot write: %s", paths->log_path, strerror(errno));
        fprintf(log, "step,train_loss,val_loss,lr,ms_per_iter,tokens_per_s\n");
        if (fclose(log) != 0) die("%s: cannot write: %s", paths->log_path, strerror(errno));
    }
    RunLog log = {fopen(paths->log_path, "a"), paths->log_path, 0, 0};
    struct stat st;
    if (!log.file || fstat(fileno(log.file), &st) != 0)
        die("%s: cannot write: %s", paths->log_path, strerror(errno));
    log.whole_bytes = (long)st.st_size;
    return log;
}

RunLog open_no_log(void) {
    RunLog log = {fopen("/dev/null", "w"), NULL, 0, 0};
    if (!log.file) die("/dev/null: cannot open");
    return log;
}

void run_log_flush(RunLog *log) {
    struct stat st;
    int flushed = fflush(log->file) == 0 && !ferror(log->file), write_errno = errno;
    if (!log->path) return;
    if (flushed && fstat(fileno(log->file), &st) == 0) {
        log->whole_bytes = (long)st.st_size;
        return;
    }
    if (!log->failed)
        fprintf(stderr, "warning: %s: cannot write: %s; the run goes on, its rows left out of the "
                "log while writing fails\n", log->path, strerror(write_errno ? write_errno : EIO));
    log->failed = 1;
    // What got through of the rows is cut off, so the log ends at a whole
    // row (were that to fail too, a resumed run drops a row cut short).
    fclose(log->file);
    int cut = truncate(log->path, (off_t)log->whole_bytes);
    (void)cut;
    log->file = fopen(log->path, "a");
    if (!log->file) die("%s: cannot reopen it: %s", log->path, strerror(errno));
}

void run_log_close(RunLog *log) {
    if (log->file) fclose(log->file);
    memset(log, 0, sizeof *log);
}
