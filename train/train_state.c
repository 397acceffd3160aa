// train_state.c: the optimizer state file that --resume continues from (see train_state.h).
#include "train_state.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/safetensors.h"
#include "../base/util.h"

#define TRAIN_STATE_FORMAT_VERSION "1"

uint64_t params_hash(const float *params, size_t n) {
    const unsigned char *bytes = (const unsigned char *)params;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ bytes[i]) * 0x100000001b3ull;
    return h;
}

int train_state_save(const char *path, const AdamW *opt, uint64_t rng_state,
                     uint64_t params_hash_value, const char *options_json, char *err,
                     size_t err_len) {
    return train_state_save_with_muon(path, opt, NULL, rng_state, params_hash_value, options_json,
                                      NULL, NULL, NULL, NULL, err, err_len);
}

int train_state_save_with_muon(const char *path, const AdamW *opt, const Muon *muon,
                               uint64_t rng_state, uint64_t params_hash_value,
                               const char *options_json, const BestModel *best,
                               const float *last_params, const Average *average,
                               const ProgressWindow *log_window, char *err, size_t err_len) {
    char step_text[32], rng_text[32], hash_text[32], best_step[32], best_loss[32];
    char log_steps[32], log_loss_sum[40], log_seconds[40], average_decay[32];
    snprintf(step_text, sizeof step_text, "%ld", opt->step);
    snprintf(rng_text, sizeof rng_text, "%llu", (unsigned long long)rng_state);
    snprintf(hash_text, sizeof hash_text, "%llu", (unsigned long long)params_hash_value);
    long P = (long)opt->num_params;
    // only the tensors and metadata this state has, in a fixed order
    StTensor tensors[5] = {{"adam.m", opt->m, 1, {P}}, {"adam.v", opt->v, 1, {P}}};
    int num_tensors = 2;
    if (muon) tensors[num_tensors++] = (StTensor){"muon.momentum", muon->momentum, 1, {P}};
    if (last_params) tensors[num_tensors++] = (StTensor){"last.params", last_params, 1, {P}};
    if (average) tensors[num_tensors++] = (StTensor){"average.params", average->params, 1, {P}};
    StMeta meta[13] = {{"format_version", TRAIN_STATE_FORMAT_VERSION},
                      {"step", step_text},
                      {"rng_state", rng_text},
                      {"params_hash", hash_text},
                      {"options", options_json}};
    int num_meta = 5;
    if (muon) meta[num_meta++] = (StMeta){"optimizer", optimizer_names[OPTIMIZER_MUON]};
    if (best && best->step >= 0) {
        snprintf(best_step, sizeof best_step, "%ld", best->step);
        snprintf(best_loss, sizeof best_loss, "%.9g", (double)best->val_loss);
        meta[num_meta++] = (StMeta){"best_step", best_step};
        meta[num_meta++] = (StMeta){"best_val_loss", best_loss};
        if (best->average) meta[num_meta++] = (StMeta){"best_weights", "average"};
    }
    if (average) {
        snprintf(average_decay, sizeof average_decay, "%.9g", (double)average->decay);
        meta[num_meta++] = (StMeta){"average_decay", average_decay};
    }
    if (log_window && log_window->steps > 0) { // %.17g: the double back bit for bit
        snprintf(log_steps, sizeof log_steps, "%d", log_window->steps);
        snprintf(log_loss_sum, sizeof log_loss_sum, "%.17g", log_window->loss_sum);
        snprintf(log_seconds, sizeof log_seconds, "%.17g", log_window->seconds);
        meta[num_meta++] = (StMeta){"log_steps", log_steps};
        meta[num_meta++] = (StMeta){"log_loss_sum", log_loss_sum};
        meta[num_meta++] = (StMeta){"log_seconds", log_seconds};
    }
    return safetensors_write(path, tensors, num_tensors, meta, num_meta, err, err_len);
}

static int parse_u64(const char *text, uint64_t *out) {
    if (!text || !*text || text[0] == '-') return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end) return 0;
    *out = v;
    return 1;
}

// A Muon file's momentum, into muon (initialised first if it is not).
static int read_momentum(StFile *file, Muon *muon, size_t num_params, char *err, size_t err_len) {
    if (!muon->momentum) muon_init(muon, num_params);
    long shape[1] = {(long)num_params};
    return safetensors_read_f32(file, "muon.momentum", 1, shape, muon->momentum, err, err_len);
}

int train_state_load(const char *path, AdamW *opt, uint64_t *rng_state,
                     uint64_t *params_hash_value, char **options_json, char *err,
                     size_t err_len) {
    return train_state_load_with_muon(path, opt, NULL, NULL, rng_state, params_hash_value,
                                      options_json, NULL, NULL, NULL, err, err_len);
}

int train_state_load_with_muon(const char *path, AdamW *opt, Muon *muon, OptimizerKind *saved,
                               uint64_t *rng_state, uint64_t *params_hash_value,
                               char **options_json, BestModel *best, float *last_params,
                               int *has_last, char *err, size_t err_len) {
    StFile *file = safetensors_open(path, err, err_len);
    if (!file) return 0;
    int ok = 0;
    const char *version = safetensors_meta(file, "format_version");
    const char *options = safetensors_meta(file, "options");
    const char *optimizer = safetensors_meta(file, "optimizer");
    int is_muon = optimizer && !strcmp(optimizer, optimizer_names[OPTIMIZER_MUON]);
    uint64_t step, best_step = 0;
    const char *best_step_text = safetensors_meta(file, "best_step");
    const char *best_loss_text = safetensors_meta(file, "best_val_loss");
    const char *best_weights = safetensors_meta(file, "best_weights");
    char *loss_end = NULL;
    float best_loss = best_loss_text ? strtof(best_loss_text, &loss_end) : 0.0f;
    long shape[1] = {(long)opt->num_params};
    int last_present = last_params && safetensors_check_f32(file, "last.params", 1, shape, NULL, 0);
    if (!version || strcmp(version, TRAIN_STATE_FORMAT_VERSION)) {
        set_error(err, err_len, "%s: format_version is %s, expected %s", path,
                  version ? version : "missing", TRAIN_STATE_FORMAT_VERSION);
    } else if (!parse_u64(safetensors_meta(file, "step"), &step) ||
               !parse_u64(safetensors_meta(file, "rng_state"), rng_state) ||
               !parse_u64(safetensors_meta(file, "params_hash"), params_hash_value)) {
        set_error(err, err_len, "%s: metadata step, rng_state or params_hash missing or not a number",
                  path);
    } else if (!options) {
        set_error(err, err_len, "%s: metadata 'options' missing", path);
    } else if (!best_step_text != !best_loss_text ||
               (best_step_text && (!parse_u64(best_step_text, &best_step) || best_step > step ||
                                   *loss_end || !(best_loss >= 0)))) {
        set_error(err, err_len, "%s: metadata best_step '%.20s' and best_val_loss '%.20s' are not a "
                  "step and a loss", path, best_step_text ? best_step_text : "missing",
                  best_loss_text ? best_loss_text : "missing");
    } else if (best_weights && (strcmp(best_weights, "average") || !best_step_text)) {
        set_error(err, err_len, "%s: metadata best_weights is '%.20s', expected average (with "
                  "best_step) or none", path, best_weights);
    } else if (optimizer && !is_muon) {
        set_error(err, err_len, "%s: metadata optimizer is '%s', expected muon or none (AdamW)",
                  path, optimizer);
    } else if (safetensors_read_f32(file, "adam.m", 1, shape, opt->m, err, err_len) &&
               safetensors_read_f32(file, "adam.v", 1, shape, opt->v, err, err_len) &&
               (!is_muon || !muon || read_momentum(file, muon, opt->num_params, err, err_len)) &&
               (!last_present ||
                safetensors_read_f32(file, "last.params", 1, shape, last_params, err, err_len))) {
        if (saved) *saved = is_muon ? OPTIMIZER_MUON : OPTIMIZER_ADAMW;
        if (best)
            *best = (BestModel){best_step_text ? (long)best_step : -1, best_loss, best_weights != NULL};
        if (has_last) *has_last = last_present;
        opt->step = (long)step;
        *options_json = strdup(options);
        ok = 1;
    }
    safetensors_close(file);
    if (!ok && err && err_len) safetensors_printable(err); // it quotes the file's metadata
    return ok;
}

int train_state_load_average(const char *path, Average *average, char *err, size_t err_len) {
    StFile *file = safetensors_open(path, err, err_len);
    if (!file) return -1;
    long shape[1] = {(long)average->num_params};
    int found = safetensors_meta(file, "average_decay") != NULL;
    int ok = !found || safetensors_read_f32(file, "average.params", 1, shape, average->params, err,
                                            err_len);
    safetensors_close(file);
    if (!ok) safetensors_printable(err);
    return !ok ? -1 : found;
}

int train_state_log_window(const char *path, ProgressWindow *window, char *err, size_t err_len) {
    memset(window, 0, sizeof *window);
    StFile *file = safetensors_open(path, err, err_len);
    if (!file) return 0;
    const char *steps = safetensors_meta(file, "log_steps");
    const char *loss_sum = safetensors_meta(file, "log_loss_sum");
    const char *seconds = safetensors_meta(file, "log_seconds");
    uint64_t n = 0;
    char *loss_end = NULL, *seconds_end = NULL;
    int ok = !steps && !loss_sum && !seconds;
    if (!ok && steps && loss_sum && seconds && parse_u64(steps, &n) && n > 0 && n < 1000000000) {
        window->loss_sum = strtod(loss_sum, &loss_end);
        window->seconds = strtod(seconds, &seconds_end);
        window->steps = (int)n;
        ok = !*loss_end && !*seconds_end && isfinite(window->loss_sum) && window->seconds >= 0;
    }
    if (!ok) {
        set_error(err, err_len, "%s: metadata log_steps '%.20s', log_loss_sum '%.30s' and "
                  "log_seconds '%.30s' are not a count of steps, a loss sum and seconds", path,
                  steps ? steps : "missing", loss_sum ? loss_sum : "missing",
                  seconds ? seconds : "missing");
        safetensors_printable(err);
        memset(window, 0, sizeof *window);
    }
    safetensors_close(file);
    return ok;
}
