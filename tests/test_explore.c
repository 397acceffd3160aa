// test_explore.c: bin/explore and its page. The page's numbers are read
// back from a real browser (tests/page_driver.mjs types the text and clicks
// as a user does) and checked against the native programs': bin/attn
// --raw's attention, bin/attn --ablate's losses, bin/sample's greedy text,
// and each snapshot's loss from its own weights. Skipped where bin/explore
// was not built (no WebAssembly toolchain) or no browser and driver are
// installed (.ci/run installs both).
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/safetensors.h"
#include "../infer/checkpoint.h"
#include "../interpret/interpret.h"
#include "check.h"
#include "fixtures.h"

static const char *const TEXT = "It was the best of times, it was the worst";
static const RandomWeights weights = {7, 0.5f, 11};

// Why the page cannot be tested here, or NULL.
static const char *explore_missing(void) {
    if (!file_exists("bin/explore"))
        return "bin/explore not built (the WebAssembly toolchain: apt-get install clang lld "
               "wasi-libc libclang-rt-14-dev-wasm32)";
    return NULL;
}

static const char *browser_missing(const char *browser) {
    const char *path = !strcmp(browser, "firefox") ? "/usr/bin/firefox-esr" : "/usr/bin/chromium";
    if (!file_exists(path)) return !strcmp(browser, "firefox") ? "firefox-esr not installed" : "chromium not installed";
    if (run_command("node -e 'process.exit(parseInt(process.versions.node) >= 18 ? 0 : 1)'", NULL) != 0)
        return "node 18 or later is not installed";
    if (!file_exists(checkout_path("build-node/node_modules/puppeteer-core/package.json")))
        return "puppeteer-core is not installed in build-node/ (.ci/run: npm install --prefix "
               "build-node puppeteer-core)";
    return NULL;
}

// The driver's JSON for the page with these arguments (NULL: a failed check).
static cJSON *drive(const char *browser, const char *page, const char *extra) {
    const char *dir = make_temp_dir();
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "node %s --browser %s --page %s --text '%s' %s",
             checkout_path("tests/page_driver.mjs"), browser, page, TEXT, extra);
    const char *capture = path_in(dir, "driver.out");
    int status = run_command(cmd, capture);
    char *out = read_text_file(capture);
    CHECK_MSG(status == 0 && out, "%s: exit %d: %.2000s", cmd, status, out ? out : "");
    const char *line = out ? strstr(out, "{\"") : NULL; // after anything node warned
    cJSON *json = line ? cJSON_Parse(line) : NULL;
    CHECK_MSG(json, "no JSON from the driver: %.2000s", out ? out : "");
    cJSON *error = json ? cJSON_GetObjectItem(json, "error") : NULL;
    CHECK_MSG(!error || cJSON_IsNull(error), "the page failed: %s",
              error && cJSON_IsString(error) ? error->valuestring : "?");
    free(out);
    return json;
}

static double number(const cJSON *json, const char *name) {
    const cJSON *item = cJSON_GetObjectItem(json, name);
    return cJSON_IsNumber(item) ? item->valuedouble : NAN;
}

// The page: bin/explore over a model made for TEXT.
static const char *write_page(const char *ckpt, const char *extra) {
    const char *dir = make_temp_dir();
    const char *page = keep_path(path_in(dir, "explore.html"));
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "bin/explore --ckpt %s --out %s %s", ckpt, page, extra);
    CHECK_MSG(run_command(cmd, NULL) == 0, "%s failed", cmd);
    return page;
}

// ---- without a browser: what bin/explore refuses, and what the page holds

static void test_explore_refuses(void) {
    const char *missing = explore_missing();
    if (missing) { skip_test(missing); return; }
    const char *ckpt = save_text_model(TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[4096];
    const char *capture = keep_path(path_in(dir, "out.txt"));
    struct {
        const char *args, *says;
    } cases[] = {
        {"--ckpt /nonexistent/model.safetensors", "no such file"},
        {"--text-file /nonexistent/text.txt", "/nonexistent/text.txt"},
        {"--text a --text-file b", "not both"},
        {"--max-snapshots -1", "--max-snapshots"},
        {"--snapshots /nonexistent/attn", "no such folder"},
        {"--bogus", "--bogus"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "bin/explore --ckpt %s --out %s/p.html %s", ckpt, dir,
                 cases[i].args);
        if (strstr(cases[i].args, "--ckpt")) snprintf(cmd, sizeof cmd, "bin/explore --out %s/p.html %s", dir, cases[i].args);
        int status = run_command(cmd, capture);
        char *out = output_of(capture);
        CHECK_MSG(status != 0 && strstr(out, cases[i].says) && count_lines(out) == 1,
                  "%s: exit %d, said: %s", cases[i].args, status, out);
        CHECK_MSG(!file_exists(path_in(dir, "p.html")), "%s: a page was written", cases[i].args);
        free(out);
    }
    // invalid UTF-8
    write_file_bytes(path_in(dir, "bad.txt"), "ab\xff", 3);
    snprintf(cmd, sizeof cmd, "bin/explore --ckpt %s --out %s/p.html --text-file %s/bad.txt", ckpt,
             dir, dir);
    CHECK(run_command(cmd, capture) != 0);
    char *out = output_of(capture);
    CHECK_MSG(strstr(out, "invalid UTF-8 at byte offset 2"), "%s", out);
    free(out);
    // nothing the user had is replaced: an existing file without --force, a
    // folder, a pipe, a link, the checkpoint itself even with --force
    write_file_bytes(path_in(dir, "mine.html"), "mine", 4);
    snprintf(cmd, sizeof cmd, "bin/explore --ckpt %s --out %s/mine.html", ckpt, dir);
    CHECK(run_command(cmd, capture) != 0);
    out = output_of(capture);
    CHECK_MSG(strstr(out, "exists; --force replaces it"), "%s", out);
    free(out);
    char *mine = read_text_file(path_in(dir, "mine.html"));
    CHECK(mine && !strcmp(mine, "mine"));
    free(mine);
    mkdir(path_in(dir, "folder"), 0755);
    mkfifo(path_in(dir, "pipe"), 0644);
    CHECK(symlink(path_in(dir, "mine.html"), path_in(dir, "link")) == 0);
    const char *others[] = {"folder", "pipe", "link"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "bin/explore --ckpt %s --out %s/%s --force", ckpt, dir, others[i]);
        CHECK_MSG(run_command(cmd, capture) != 0, "--out %s accepted", others[i]);
        out = output_of(capture);
        CHECK_MSG(strstr(out, "not a regular file"), "%s: %s", others[i], out);
        free(out);
    }
    struct stat st;
    CHECK(lstat(path_in(dir, "pipe"), &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(lstat(path_in(dir, "link"), &st) == 0 && S_ISLNK(st.st_mode));
    long before = file_size(ckpt);
    snprintf(cmd, sizeof cmd, "bin/explore --ckpt %s --out %s --force", ckpt, ckpt);
    CHECK(run_command(cmd, capture) != 0);
    out = output_of(capture);
    CHECK_MSG(strstr(out, "is the checkpoint itself"), "%s", out);
    free(out);
    CHECK(file_size(ckpt) == before);
    // a model too large for a page: one line with the size and the limit,
    // before anything else is loaded (100 snapshots, links to one checkpoint
    // of 3.2 MB: 101 models, 323 MB)
    GPTConfig big = {.vocab_size = 7, .context = 8, .layers = 1, .heads = 4, .dim = 256};
    GPT model;
    build_model(&model, &big, (RandomWeights){1, 0, 0});
    const char *run = keep_path(path_in(dir, "big"));
    mkdir(run, 0755);
    const char *big_ckpt = keep_path(path_in(run, "model.safetensors"));
    char err[512];
    Vocab vocab;
    uint32_t chars[7] = {'a', 'b', 'c', 'd', 'e', 'f', 'g'};
    CHECK(vocab_from_code_points(&vocab, chars, 7, err, sizeof err));
    CHECK_MSG(gpt_save(big_ckpt, &model, &vocab, err, sizeof err), "%s", err);
    vocab_free(&vocab);
    size_t params = model.num_params;
    gpt_free(&model);
    mkdir(path_in(run, "attn"), 0755);
    for (int s = 1; s <= 100; s++) {
        char step[64], path[600];
        snprintf(step, sizeof step, "attn/step_%d", 10 * s);
        mkdir(path_in(run, step), 0755);
        snprintf(path, sizeof path, "%s/%s/model.safetensors", run, step);
        CHECK(link(big_ckpt, path) == 0);
        snprintf(path, sizeof path, "%s/%s/atlas.safetensors", run, step);
        write_file_bytes(path, "", 0);
    }
    snprintf(cmd, sizeof cmd, "bin/explore --ckpt %s --out %s/big.html --max-snapshots 100", big_ckpt,
             dir);
    CHECK(run_command(cmd, capture) != 0);
    out = output_of(capture);
    char says[128];
    snprintf(says, sizeof says, "101 models of %zu parameters make %.0f MB", params,
             101.0 * sizeof(float) * params / 1e6);
    CHECK_MSG(strstr(out, says) && strstr(out, "a page holds at most 268 MB") && count_lines(out) == 1,
              "%s (want \"%s\")", out, says);
    free(out);
    CHECK(!file_exists(path_in(dir, "big.html")));
    snprintf(cmd, sizeof cmd, "bin/explore --ckpt %s --out %s/big.html --max-snapshots 2", big_ckpt, dir);
    CHECK_MSG(run_command(cmd, capture) == 0, "3 models of 3.2 MB refused");
    // with --force a page of ours is replaced
    snprintf(cmd, sizeof cmd, "bin/explore --ckpt %s --out %s/mine.html --force", ckpt, dir);
    CHECK(run_command(cmd, NULL) == 0);
    CHECK(file_size(path_in(dir, "mine.html")) > 1000);
}

// The page holds the checkpoint's weights as they are, the module, a policy
// that allows no request, and nothing that names another host.
static void test_page_contents(void) {
    const char *missing = explore_missing();
    if (missing) { skip_test(missing); return; }
    const char *ckpt = save_text_model(TEXT, 16, weights);
    const char *page = write_page(ckpt, "--text 'hello'");
    char *html = read_text_file(page);
    CHECK(html);
    if (!html) return;
    CHECK(strstr(html, "Content-Security-Policy\" content=\"default-src 'none';"));
    CHECK_MSG(!strstr(html, "http://") && !strstr(html, "https://") && !strstr(html, "//cdn"),
              "the page names a host");
    CHECK_MSG(!strchr(strstr(html, "<body>"), '@') || !strstr(html, "@DATA@"), "a template mark is left");
    CHECK(strstr(html, "<script id=\"module\" type=\"text/plain\">AGFzbQ")); // "\0asm" in base64
    // the weights, decoded, are the checkpoint's bit for bit
    GPT model;
    Vocab vocab;
    char err[512];
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    const char *mark = "<script class=\"weights\" type=\"text/plain\" data-model=\"0\">";
    const char *b64 = strstr(html, mark);
    CHECK(b64);
    if (b64) {
        b64 += strlen(mark);
        static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t n = model.num_params * sizeof(float), got = 0;
        unsigned char *bytes = xcalloc(n + 3, 1);
        unsigned v = 0;
        int bits = 0;
        for (const char *c = b64; *c && *c != '<' && *c != '='; c++) {
            const char *d = strchr(digits, *c);
            if (!d) break;
            v = v << 6 | (unsigned)(d - digits);
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                if (got < n + 3) bytes[got++] = (unsigned char)(v >> bits);
            }
        }
        CHECK_MSG(got == n, "%zu bytes of weights, the checkpoint has %zu", got, n);
        CHECK(got == n && !memcmp(bytes, model.params_memory, n));
        free(bytes);
    }
    gpt_free(&model);
    vocab_free(&vocab);
    free(html);
}

// ---- in a browser

// The attention the page shows for TEXT against bin/attn --raw's, every
// head, every cell; then the ablated loss against bin/attn --ablate's, and
// the greedy text against bin/sample's.
static void check_page_in(const char *browser) {
    const char *missing = explore_missing();
    if (!missing) missing = browser_missing(browser);
    if (missing) { skip_test(missing); return; }
    int context = 64;
    const char *ckpt = save_text_model(TEXT, context, weights);
    const char *page = write_page(ckpt, "");
    const char *dir = make_temp_dir();
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text '%s' --out %s/attn --raw --ablate", ckpt,
             TEXT, dir);
    CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
    // the unit to switch off: layer 1 head 0 (unit NH), mean-ablated
    cJSON *json = drive(browser, page, "--ablate 2 --kind 2");
    if (!json) return;
    CHECK_MSG(number(json, "resources") == 0, "the page fetched %g resources", number(json, "resources"));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(json, "requests")) == 0);
    int n = (int)number(json, "n");
    CHECK_MSG(n == (int)strlen(TEXT), "the page read %d characters of %zu", n, strlen(TEXT));
    char err[512];
    StFile *raw = safetensors_open(path_in(dir, "attn/attention.safetensors"), err, sizeof err);
    CHECK_MSG(raw, "%s", err);
    GPT model;
    Vocab vocab;
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    int L = model.config.layers, NH = model.config.heads;
    long shape[4] = {L, NH, n, n};
    float *want = xcalloc((size_t)L * NH * n * n, sizeof(float));
    if (raw) CHECK_MSG(safetensors_read_f32(raw, "attn", 4, shape, want, err, sizeof err), "%s", err);
    const cJSON *heads = cJSON_GetObjectItem(json, "attention");
    CHECK(cJSON_GetArraySize(heads) == L * NH);
    double worst = 0;
    for (int h = 0; h < L * NH && h < cJSON_GetArraySize(heads); h++) {
        const cJSON *cells = cJSON_GetArrayItem(heads, h);
        CHECK(cJSON_GetArraySize(cells) == n * n);
        for (int i = 0; i < n * n && i < cJSON_GetArraySize(cells); i++) {
            double d = fabs(cJSON_GetArrayItem(cells, i)->valuedouble - want[(long)h * n * n + i]);
            if (d > worst) worst = d;
        }
    }
    CHECK_MSG(worst <= 1e-5, "%s: attention differs from bin/attn --raw's by up to %g", browser, worst);
    // the losses: unchanged, and layer 1 head 0 mean-ablated, as in ablation.csv
    char *csv = read_text_file(path_in(dir, "attn/ablation.csv"));
    CHECK(csv);
    double loss = NAN, mean_ablated = NAN;
    for (char *row = csv ? strchr(csv, '\n') : NULL; row && row[1]; row = strchr(row + 1, '\n')) {
        int l, h;
        double clean, zero, mean;
        if (sscanf(row + 1, "%d,%d,%lf,%lf,%lf", &l, &h, &clean, &zero, &mean) == 5 && l == 1 && h == 0) {
            loss = clean;
            mean_ablated = mean;
        }
    }
    free(csv);
    const cJSON *ablated = cJSON_GetObjectItem(json, "ablated");
    CHECK_NEAR(number(json, "loss"), loss, 1e-5);
    CHECK_NEAR(number(ablated, "cleanLoss"), loss, 1e-5);
    CHECK_NEAR(number(ablated, "loss"), mean_ablated, 1e-5);
    CHECK_MSG(fabs(mean_ablated - loss) > 1e-3, "the ablation changed nothing: the check cannot fail");
    cJSON_Delete(json);
    // greedy writing: bin/sample --temperature 0's characters, one by one
    int count = 60;
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s --prompt 'It was' --temperature 0 -n %d --quiet",
             ckpt, count);
    const char *capture = path_in(dir, "sample.txt");
    CHECK(run_command(cmd, capture) == 0);
    char *sample = read_text_file(capture);
    char extra[256];
    snprintf(extra, sizeof extra, "--write %d --temperature 0 --prompt 'It was'", count);
    json = drive(browser, page, extra);
    if (json && sample) {
        const char *written = cJSON_GetStringValue(cJSON_GetObjectItem(json, "written"));
        size_t len = strlen(sample);
        while (len && sample[len - 1] == '\n' && written && strlen(written) < len) sample[--len] = 0;
        CHECK_MSG(written && !strcmp(written, sample), "%s wrote \"%s\", bin/sample \"%s\"", browser,
                  written ? written : "(nothing)", sample);
    }
    cJSON_Delete(json);
    free(sample);
    free(want);
    if (raw) safetensors_close(raw);
    gpt_free(&model);
    vocab_free(&vocab);
}

static void test_page_in_chromium(void) { check_page_in("chromium"); }
static void test_page_in_firefox(void) { check_page_in("firefox"); }

// Bad text in the page: characters outside the vocabulary are skipped and
// said, a text past the context is cut to its last characters, an empty
// text shows nothing and breaks nothing.
static void test_page_bad_text(void) {
    const char *missing = explore_missing();
    if (!missing) missing = browser_missing("chromium");
    if (missing) { skip_test(missing); return; }
    const char *ckpt = save_text_model(TEXT, 16, weights);
    const char *page = write_page(ckpt, "");
    const char *dir = make_temp_dir();
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "node %s --browser chromium --page %s "
             "--text 'It was \xe2\x82\xac the best of times, it was the worst of times'",
             checkout_path("tests/page_driver.mjs"), page);
    const char *capture = path_in(dir, "out.json");
    CHECK(run_command(cmd, capture) == 0);
    char *out = read_text_file(capture);
    cJSON *json = out ? cJSON_Parse(strstr(out, "{\"")) : NULL;
    CHECK_MSG(json, "%s", out ? out : "");
    if (json) {
        CHECK(number(json, "n") == 16);
        const char *note = cJSON_GetStringValue(cJSON_GetObjectItem(json, "textnote"));
        CHECK_MSG(note && strstr(note, "1 character outside the vocabulary") &&
                  strstr(note, "the last 16 characters"), "note: %s", note ? note : "");
        cJSON_Delete(json);
    }
    free(out);
    snprintf(cmd, sizeof cmd, "node %s --browser chromium --page %s --text ''",
             checkout_path("tests/page_driver.mjs"), page);
    CHECK(run_command(cmd, capture) == 0);
    out = read_text_file(capture);
    json = out ? cJSON_Parse(strstr(out, "{\"")) : NULL;
    CHECK_MSG(json && number(json, "n") == 0 && cJSON_IsNull(cJSON_GetObjectItem(json, "error")),
              "empty text: %s", out ? out : "");
    cJSON_Delete(json);
    free(out);
}

// Training snapshots in the page: each replays the text through its own
// weights; its loss is what the native forward gives with them.
static void test_page_snapshots(void) {
    const char *missing = explore_missing();
    if (!missing) missing = browser_missing("chromium");
    if (missing) { skip_test(missing); return; }
    const char *dir = make_temp_dir();
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "bin/train --data %s " TINY_ONE_THREAD " --iters 30 --eval-every 10 "
             "--heatmaps-every 10 --out %s/run", make_corpus(dir, "corpus.txt", 20000), dir);
    CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
    const char *run = path_in(dir, "run");
    char ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", run);
    const char *page = write_page(ckpt, "");
    cJSON *json = drive("chromium", page, "--snapshots");
    if (!json) return;
    const cJSON *snaps = cJSON_GetObjectItem(json, "snapshots");
    CHECK_MSG(cJSON_GetArraySize(snaps) == 4, "%d models in the page (3 snapshots and the checkpoint)",
              cJSON_GetArraySize(snaps));
    long steps[] = {10, 20, 30};
    for (int i = 0; i < 3 && i < cJSON_GetArraySize(snaps); i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/attn/step_%ld/model.safetensors", run, steps[i]);
        GPT model;
        Vocab vocab;
        char err[512];
        CHECK_MSG(gpt_load(path, &model, &vocab, err, sizeof err), "%s", err);
        int T = model.config.context, ids[64], n = 0;
        for (const char *c = TEXT; *c && n < 64; c++) {
            int id = vocab_id(&vocab, (unsigned char)*c);
            if (id >= 0) ids[n++] = id;
        }
        int start = n > T ? n - T : 0;
        n -= start;
        gpt_alloc_inference(&model, 1, T);
        double want = ablated_loss(&model, ids + start, ids + start + 1, 1, n - 1, 0, ABLATE_NONE, NULL, NULL);
        const cJSON *s = cJSON_GetArrayItem(snaps, i);
        const char *label = cJSON_GetStringValue(cJSON_GetObjectItem(s, "label"));
        char step[32];
        snprintf(step, sizeof step, "step %ld", steps[i]);
        CHECK_MSG(label && strstr(label, step), "model %d is \"%s\", not %s", i, label ? label : "", step);
        CHECK_NEAR(number(s, "loss"), want, 1e-5);
        gpt_free(&model);
        vocab_free(&vocab);
    }
    cJSON_Delete(json);
}

void suite_explore(void) {
    run_test("explore: bin/explore refuses bad input in one line and replaces nothing of the user's",
             test_explore_refuses);
    run_test("explore: the page holds the checkpoint's weights bit for bit, the module, no host",
             test_page_contents);
    run_test("explore: in Chromium, typed text: attention = bin/attn --raw's (1e-5), ablated loss = "
             "--ablate's, greedy = bin/sample's", test_page_in_chromium);
    run_test("explore: the same in Firefox", test_page_in_firefox);
    run_test("explore: unknown characters skipped and said, a long text cut, an empty one harmless",
             test_page_bad_text);
    run_test("explore: each training snapshot replays the text with its own weights",
             test_page_snapshots);
}
