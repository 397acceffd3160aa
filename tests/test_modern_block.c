// test_modern_block.c: the block's choices (--norm, --pos, --rope-base,
// --mlp, --qk-norm, --untie, --softcap, --zero-init-proj) through the
// programs: refused when they cannot work, named in the checkpoint, kept by
// a resumed run and by --init-from, and a model with all of them trained,
// resumed, sampled and loaded back bit for bit. (Their gradients and the
// KV cache: test_model.c, test_sample.c; each op: test_ops.c.)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/safetensors.h"
#include "../infer/checkpoint.h"
#include "check.h"
#include "fixtures.h"

// Exit 2, one line naming the problem, nothing written.
static void test_block_usage_errors(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *cases[][2] = {
        {"--norm batchnorm", "--norm batchnorm: expected layernorm or rmsnorm"},
        {"--pos absolute", "--pos absolute: expected learned or rope"},
        {"--mlp tanh", "--mlp tanh: expected gelu, relu2 or swiglu"},
        {"--softcap -1", "--softcap -1: must be 0 (off) or positive"},
        {"--pos rope --rope-base 1", "--rope-base 1: must be above 1"},
        {"--pos rope --rope-base 0.5", "--rope-base 0.5: must be above 1"},
        {"--rope-base 500", "--rope-base is for --pos rope"},
        {"--mlp swiglu --dim 16 --heads 2", "SwiGLU's hidden width 8 x dim / 3"},
        {"--pos rope --dim 18 --heads 2", "head size 9 (dim 18 / heads 2) must be even"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = RUN(capture, NULL, "bin/train --data %s --out %s/run %s", corpus, dir,
                         cases[i][0]);
        char *out = output_of(capture);
        CHECK_MSG(status == 2 && strstr(out, cases[i][1]) && count_lines(out) == 1,
                  "'%s' exited %d:\n%s", cases[i][0], status, out);
        free(out);
    }
    CHECK(!file_exists(path_in(dir, "run")));
}

// The config a checkpoint's metadata holds, or "" (to be freed).
static char *saved_config(const char *path) {
    char err[512];
    StFile *file = safetensors_open(path, err, sizeof err);
    CHECK_MSG(file != NULL, "%s", err);
    if (!file) return strdup("");
    const char *config = safetensors_meta(file, "config");
    char *copy = strdup(config ? config : "");
    safetensors_close(file);
    return copy;
}

// The vocabulary size a checkpoint's config names.
static long vocab_size_of(const char *path) {
    char *config = saved_config(path);
    const char *at = strstr(config, "\"vocab_size\":");
    long v = at ? strtol(at + strlen("\"vocab_size\":"), NULL, 10) : -1;
    free(config);
    return v;
}

// A run with every choice: its checkpoint names them and holds lm_head and
// the QK-norm gains but no wpe or norm biases; --resume continues it (a
// contradicting flag refused), the checkpoint loads back to the same
// logits, bin/sample writes text from it in every mode, and --init-from
// keeps its block (refusing another).
static void test_modern_run(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *run = keep_path(path_in(dir, "run"));
    CHECK(RUN(capture, NULL, "bin/train " TINY_MODERN " --iters 20 --eval-every 10 --data %s --out %s --stop-at 10",
              corpus, run) == 0);
    const char *model_path = keep_path(path_in(run, "model.safetensors"));
    char *config = saved_config(model_path);
    const char *keys[] = {"\"norm\":\"rmsnorm\"", "\"pos\":\"rope\"", "\"rope_base\":500",
                          "\"mlp\":\"swiglu\"", "\"qk_norm\":true", "\"untie\":true",
                          "\"softcap\":15"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK_MSG(strstr(config, keys[i]), "config %s lacks %s", config, keys[i]);
    free(config);
    char err[512];
    StFile *file = safetensors_open(model_path, err, sizeof err);
    CHECK_MSG(file != NULL, "%s", err);
    if (file) {
        struct {
            const char *name;
            int ndim;
            long shape[2];
            int present;
        } tensors[] = {{"lm_head.weight", 2, {0, 24}, 1},
                       {"h.1.attn.q_norm.weight", 1, {12, 0}, 1},
                       {"h.0.mlp.fc.weight", 2, {2 * 64, 24}, 1},
                       {"wpe", 2, {16, 24}, 0},
                       {"h.0.ln_1.bias", 1, {24, 0}, 0}};
        for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
            long shape[2] = {tensors[i].shape[0], tensors[i].shape[1]};
            if (!strcmp(tensors[i].name, "lm_head.weight")) shape[0] = vocab_size_of(model_path);
            CHECK_MSG(safetensors_check_f32(file, tensors[i].name, tensors[i].ndim, shape, err,
                                            sizeof err) == tensors[i].present,
                      "%s: %s", tensors[i].name, tensors[i].present ? err : "present");
        }
        safetensors_close(file);
    }

    // resumed: the block comes from the checkpoint; a contradiction is refused
    int status = RUN(capture, NULL, "bin/train --resume --out %s --pos learned", run);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "--pos contradicts") && count_lines(out) == 1,
              "exited %d:\n%s", status, out);
    free(out);
    CHECK(RUN(capture, NULL, "bin/train --resume --out %s", run) == 0);
    out = output_of(capture);
    CHECK_MSG(strstr(out, "step 20") || strstr(out, "20/20") || strstr(out, "iters 20"),
              "the resumed run did not reach step 20:\n%s", out);
    free(out);

    // loads back: the same model, the same logits
    GPT model;
    Vocab vocab;
    CHECK(gpt_load(model_path, &model, &vocab, err, sizeof err));
    CHECK(model.config.norm == NORM_RMSNORM && model.config.pos == POS_ROPE &&
          model.config.rope_base == 500.0f && model.config.mlp == MLP_SWIGLU &&
          model.config.qk_norm && model.config.untie && model.config.softcap == 15.0f);
    const char *saved_again = keep_path(path_in(dir, "again.safetensors"));
    CHECK(gpt_save(saved_again, &model, &vocab, err, sizeof err));
    GPT again;
    Vocab vocab_again;
    CHECK(gpt_load(saved_again, &again, &vocab_again, err, sizeof err));
    CHECK(again.num_params == model.num_params &&
          !memcmp(again.params_memory, model.params_memory, model.num_params * sizeof(float)));
    gpt_free(&again);
    vocab_free(&vocab_again);
    gpt_free(&model);
    vocab_free(&vocab);

    // bin/sample in each mode
    const char *modes[] = {"", "--slide 4", "--num-samples 3", "--num-samples 2 --slide 8",
                           "--precision bf16"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        status = RUN(capture, NULL, "bin/sample --ckpt %s -n 60 --seed 3 --quiet %s", model_path,
                     modes[i]);
        out = output_of(capture);
        CHECK_MSG(status == 0 && strlen(out) >= 60, "bin/sample %s exited %d:\n%s", modes[i],
                  status, out);
        free(out);
    }

    // --init-from keeps the block, and refuses another
    status = RUN(capture, NULL, "bin/train --init-from %s --data %s --out %s/fine --iters 2 "
                 "--threads 1 --sample-chars 0 --eval-batches 1 --pos learned", model_path, corpus, dir);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "--pos contradicts") && count_lines(out) == 1,
              "exited %d:\n%s", status, out);
    free(out);
    CHECK(RUN(capture, NULL, "bin/train --init-from %s --data %s --out %s/fine --iters 2 "
              "--threads 1 --sample-chars 0 --eval-batches 1 --batch 4", model_path, corpus, dir) == 0);
    config = saved_config(path_in(dir, "fine/model.safetensors"));
    CHECK_MSG(strstr(config, "\"pos\":\"rope\"") && strstr(config, "\"mlp\":\"swiglu\""),
              "fine-tuned config %s", config);
    free(config);
}

// Without the flags, a checkpoint's config has no block keys: what GPT-2's
// block always wrote.
static void test_gpt2_config_unchanged(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *run = keep_path(path_in(dir, "run"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 2 --data %s --out %s", corpus,
              run) == 0);
    char *config = saved_config(path_in(run, "model.safetensors"));
    const char *keys[] = {"norm", "pos", "rope_base", "mlp", "qk_norm", "untie", "softcap"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char quoted[32];
        snprintf(quoted, sizeof quoted, "\"%s\"", keys[i]);
        CHECK_MSG(!strstr(config, quoted), "config %s has %s", config, quoted);
    }
    free(config);
}

// The step and value of the lowest val_loss in a run's log.csv, and how
// many evaluations were above the lowest one before them.
static long best_in_log(const char *dir, double *best, int *worse) {
    char *log = read_text_file(path_in(dir, "log.csv"));
    long best_step = -1;
    *worse = 0;
    for (char *line = strchr(log, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        long step;
        double train, val;
        if (sscanf(line + 1, "%ld,%lf,%lf", &step, &train, &val) != 3) continue; // no val
        if (best_step < 0 || val < *best) *best = val, best_step = step;
        else *worse += 1;
    }
    free(log);
    return best_step;
}

// Evaluated every step at a rate that makes the loss jump about: the model
// file is the model of the step with the lowest validation loss (the same
// bytes as a run stopped at that step), the summary names that step and
// loss, and a run stopped and resumed ends where an unbroken one does (it
// continues from its last weights, not the best).
static void test_keeps_the_best_model(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *run = keep_path(path_in(dir, "run"));
#define JUMPY TINY_ONE_THREAD " --iters 40 --eval-every 1 --lr 0.05 --min-lr 0.05 --warmup 0"
    CHECK(RUN(capture, NULL, "bin/train " JUMPY " --data %s --out %s", corpus, run) == 0);
    double best = 0;
    int worse;
    long best_step = best_in_log(run, &best, &worse);
    CHECK_MSG(worse > 0 && best_step > 0 && best_step < 40,
              "expected some evaluations above the best (%d) and a best before the end (step %ld)",
              worse, best_step);
    char *out = output_of(capture);
    char expected[128];
    snprintf(expected, sizeof expected, "final val loss %.4f, the model of step %ld", best, best_step);
    CHECK_MSG(strstr(out, expected), "the summary does not say '%s':\n%s", expected, out);
    free(out);
    const char *at_best = keep_path(path_in(dir, "at_best"));
    CHECK(RUN(NULL, NULL, "bin/train " JUMPY " --eval-every 1000 --data %s --out %s --stop-at %ld",
              corpus, at_best, best_step) == 0);
    CHECK(same_bytes(path_in(run, "model.safetensors"), path_in(at_best, "model.safetensors")));
    // stopped at 30 and resumed: the same end as the unbroken run
    const char *broken = keep_path(path_in(dir, "broken"));
    CHECK(RUN(NULL, NULL, "bin/train " JUMPY " --data %s --out %s --stop-at 30", corpus, broken) == 0);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s", broken) == 0);
    CHECK(same_bytes(path_in(run, "model.safetensors"), path_in(broken, "model.safetensors")));
    CHECK(same_tensors(run, broken, "optimizer.safetensors"));
#undef JUMPY
}

// --max-passes caps a --minutes plan at that many passes over the
// training text, however many steps the time would allow, and says so.
static void test_max_passes_caps_the_plan(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    // the training split: 90% of the corpus's characters (all ASCII)
    long chars = 20000 - (long)(20000 * 0.1f + 0.5f), per_step = 4 * 16;
    CHECK(RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --warmup 2 --minutes 0.1 --max-passes 0.1 "
              "--data %s --out %s/run", corpus, dir) == 0);
    char *out = output_of(capture);
    char expected[128];
    snprintf(expected, sizeof expected, "--iters %ld ", (long)(0.1 * chars / per_step));
    CHECK_MSG(strstr(out, "capped at --max-passes 0.1") && strstr(out, expected),
              "expected '%s' and the cap named:\n%s", expected, out);
    free(out);
}

void suite_modern(void) {
    run_test("modern: bad block flags exit 2 with one line, nothing written",
             test_block_usage_errors);
    run_test("modern: a run with every choice: saved, resumed, loaded, sampled, fine-tuned",
             test_modern_run);
    run_test("modern: GPT-2's block writes the config it always wrote",
             test_gpt2_config_unchanged);
    run_test("modern: a run keeps its best model, and resumes from its last weights",
             test_keeps_the_best_model);
    run_test("modern: --max-passes caps a --minutes plan", test_max_passes_caps_the_plan);
}
