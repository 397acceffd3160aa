// test_atlas.c: the attention atlas: head scores on hand-built attention
// with known answers, the induction probe, the circuits against a direct
// double-precision computation, Unifont labels read back pixel by pixel,
// training snapshots, the HTML explorer in headless Chromium, and bad input.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stb/stb_image.h>

#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../viz/atlas.h"
#include "../viz/circuits.h"
#include "../viz/font.h"
#include "../viz/heatmap.h"
#include "../interpret/induction_measures.h"
#include "../viz/scores.h"
#include "../viz/unifont.h"
#include "check.h"
#include "fixtures.h"

#define VOCAB_TEXT "\n !,.:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
// A random model over VOCAB_TEXT (build_text_model).
static const RandomWeights weights = {5, 0.3f, 6};

// ---- scores

static void test_scores_known_answers(void) {
    enum { T = 8 };
    float prev[T * T] = {0}, uniform[T * T] = {0}, self[T * T] = {0};
    int ids[T] = {1, 2, 1, 3, 2, 1, 4, 4};
    for (int i = 0; i < T; i++) {
        prev[i * T + (i ? i - 1 : 0)] = 1;
        self[i * T + i] = 1;
        for (int j = 0; j <= i; j++) uniform[i * T + j] = 1.0f / (i + 1);
    }
    HeadScores p, u, s;
    head_scores(prev, ids, T, &p);
    head_scores(uniform, ids, T, &u);
    head_scores(self, ids, T, &s);
    CHECK_NEAR(p.value[SCORE_PREVIOUS], 1.0, 1e-12);
    CHECK_NEAR(p.value[SCORE_CURRENT], 0.0, 1e-12);
    CHECK_NEAR(p.value[SCORE_FIRST], 1.0 / 7, 1e-12); // only row 1's previous is position 0
    CHECK_NEAR(p.value[SCORE_ENTROPY], 0.0, 1e-12);
    CHECK_NEAR(p.value[SCORE_DISTANCE], 1.0, 1e-12);
    CHECK_NEAR(s.value[SCORE_CURRENT], 1.0, 1e-12);
    CHECK_NEAR(s.value[SCORE_DUPLICATE], 0.0, 1e-12);
    // uniform attention scores exactly its own baseline, whatever the score
    double baseline = 0;
    for (int i = 1; i < T; i++) baseline += 1.0 / (i + 1);
    baseline /= T - 1;
    CHECK_NEAR(u.uniform[SCORE_PREVIOUS], baseline, 1e-12);
    for (int k = 0; k < NUM_ATTENTION_SCORES; k++)
        if (k != SCORE_INDUCTION) {
            CHECK_MSG(fabs(u.value[k] - u.uniform[k]) < 1e-6, "%s: uniform %g, baseline %g",
                      score_name(k), u.value[k], u.uniform[k]);
            CHECK_NEAR(p.uniform[k], u.uniform[k], 1e-12); // the baseline does not depend on A
        }
    // duplicate rows: 2 (1 at 0), 4 (2 at 1), 5 (1 at 0, 2), 7 (4 at 6): matches 1,1,2,1
    double dup = (1.0 / 3 + 1.0 / 5 + 2.0 / 6 + 1.0 / 8) / 4;
    CHECK_NEAR(u.value[SCORE_DUPLICATE], dup, 1e-6);
    CHECK_NEAR(u.value[SCORE_ENTROPY], 1.0, 1e-6);
    CHECK(head_dominant_type(&p) == SCORE_PREVIOUS);
    CHECK(head_dominant_type(&s) == SCORE_CURRENT);
    CHECK(head_dominant_type(&u) == -1);
}

static void test_induction(void) {
    // the probe: n distinct ids, then the same n again
    int ids[64];
    int P = induction_probe(10, 64, ids);
    CHECK(P == 20);
    for (int i = 0; i < 10; i++) {
        CHECK(ids[i] == ids[10 + i] && ids[i] >= 0 && ids[i] < 10);
        for (int j = 0; j < i; j++) CHECK(ids[i] != ids[j]);
    }
    CHECK(induction_probe(500, 64, ids) == 64);
    // an induction head on it: row i >= n looks at i - n + 1; other rows at themselves
    enum { N = 6, T = 2 * N };
    int probe[T];
    for (int i = 0; i < N; i++) probe[i] = probe[N + i] = 7 * i + 3;
    float ind[T * T] = {0}, prev[T * T] = {0};
    for (int i = 0; i < T; i++) {
        ind[i * T + (i >= N ? i - N + 1 : i)] = 1;
        prev[i * T + (i ? i - 1 : 0)] = 1;
    }
    double value, uniform, want_uniform = 0;
    head_induction(ind, probe, T, &value, &uniform);
    for (int i = N; i < T; i++) want_uniform += 1.0 / (i + 1);
    want_uniform /= N;
    CHECK_NEAR(value, 1.0, 1e-12);
    CHECK_NEAR(uniform, want_uniform, 1e-12);
    head_induction(prev, probe, T, &value, &uniform); // a previous-token head is no induction head
    CHECK_NEAR(value, 0.0, 1e-12);
    // the model's scores: induction from the probe forward, the rest from the text's
    GPT model;
    Vocab vocab;
    build_text_model(&model, &vocab, VOCAB_TEXT, 16, weights);
    gpt_alloc_inference(&model, 1, 16);
    int text[10] = {3, 5, 7, 3, 5, 9, 9, 1, 2, 3};
    HeadScores scores[4];
    model_head_scores(&model, text, 10, scores);
    int pids[16];
    int PP = induction_probe(vocab.size, 16, pids);
    CHECK(model.cur_T == 10);
    for (int h = 0; h < 4; h++) {
        HeadScores here;
        head_scores(gpt_attention_probs(&model, h / 2, h % 2, 0), text, 10, &here);
        CHECK_NEAR(scores[h].value[SCORE_PREVIOUS], here.value[SCORE_PREVIOUS], 1e-12);
    }
    gpt_forward(&model, pids, 1, PP, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    for (int h = 0; h < 4; h++) {
        head_induction(gpt_attention_probs(&model, h / 2, h % 2, 0), pids, PP, &value, &uniform);
        CHECK_NEAR(scores[h].value[SCORE_INDUCTION], value, 1e-12);
    }
    gpt_free(&model);
    vocab_free(&vocab);
}

// ---- circuits

static void test_circuits(void) {
    GPT model;
    Vocab vocab;
    build_text_model(&model, &vocab, VOCAB_TEXT, 16, weights);
    int C = 16, NH = 2, hs = 8, n = 7, ids[7] = {0, 3, 9, 12, 20, 33, 40};
    float qk[49], ov[49];
    double worst_qk = 0, worst_ov = 0;
    for (int layer = 0; layer < 2; layer++)
        for (int head = 0; head < NH; head++) {
            circuit_qk(&model, layer, head, ids, n, qk);
            circuit_ov(&model, layer, head, ids, n, ov);
            const float *wv = model.params.w_v + layer * C * C, *wo = model.params.w_o + layer * C * C;
            // the full products in double: E W_Q,h^T W_K,h E^T and E W_O,h W_V,h E^T
            for (int a = 0; a < n; a++)
                for (int b = 0; b < n; b++) {
                    const float *ea = model.params.wte + ids[a] * C, *eb = model.params.wte + ids[b] * C;
                    double sum = qk_score_reference(&model, layer, head, ea, eb);
                    worst_qk = fmax(worst_qk, fabs(sum / sqrt(hs) - qk[a * n + b]));
                    double logit = 0; // attend to a, logit of b
                    for (int c2 = 0; c2 < C; c2++) {
                        double o = 0;
                        for (int d = head * hs; d < (head + 1) * hs; d++) {
                            double v = 0;
                            for (int c = 0; c < C; c++) v += (double)wv[d * C + c] * ea[c];
                            o += (double)wo[c2 * C + d] * v;
                        }
                        logit += o * eb[c2];
                    }
                    worst_ov = fmax(worst_ov, fabs(logit - ov[a * n + b]));
                }
            // singular values: their squares sum to |W_O,h W_V,h|_F^2, the largest
            // matches power iteration on M^T M
            double m[16][16], sv[8];
            for (int r = 0; r < C; r++)
                for (int c = 0; c < C; c++) {
                    m[r][c] = 0;
                    for (int d = head * hs; d < (head + 1) * hs; d++)
                        m[r][c] += (double)wo[r * C + d] * wv[d * C + c];
                }
            circuit_ov_singular_values(&model, layer, head, sv);
            double frob = 0, sum_sq = 0;
            for (int r = 0; r < C; r++)
                for (int c = 0; c < C; c++) frob += m[r][c] * m[r][c];
            for (int i = 0; i < hs; i++) {
                sum_sq += sv[i] * sv[i];
                if (i) CHECK(sv[i] <= sv[i - 1]);
            }
            CHECK_NEAR(sum_sq, frob, 1e-9 * frob);
            double x[16], y[16], lambda = 0;
            for (int i = 0; i < C; i++) x[i] = 1.0 + i;
            for (int it = 0; it < 2000; it++) {
                double mx[16], norm = 0;
                for (int r = 0; r < C; r++) {
                    mx[r] = 0;
                    for (int c = 0; c < C; c++) mx[r] += m[r][c] * x[c];
                }
                for (int c = 0; c < C; c++) {
                    y[c] = 0;
                    for (int r = 0; r < C; r++) y[c] += m[r][c] * mx[r];
                    norm += y[c] * y[c];
                }
                norm = sqrt(norm);
                lambda = norm;
                for (int c = 0; c < C; c++) x[c] = y[c] / norm;
            }
            CHECK_NEAR(sv[0], sqrt(lambda), 1e-6 * sv[0]);
        }
    CHECK_MSG(worst_qk < 1e-5 && worst_ov < 1e-5, "QK off by %g, OV off by %g", worst_qk, worst_ov);
    // a hand-made head: W_V,h picks channels 0..7, W_O,h scales them back by
    // 8, 7, ..., 1: the singular values are exactly those
    memset(model.params.w_v, 0, sizeof(float) * C * C);
    memset(model.params.w_o, 0, sizeof(float) * C * C);
    for (int d = 0; d < hs; d++) {
        model.params.w_v[(hs + d) * C + d] = 1;        // head 1 rows
        model.params.w_o[(d + 3) * C + hs + d] = 8 - d; // head 1 columns
    }
    double sv[8];
    circuit_ov_singular_values(&model, 0, 1, sv);
    for (int d = 0; d < hs; d++) CHECK_NEAR(sv[d], 8 - d, 1e-12);
    circuit_ov_singular_values(&model, 0, 0, sv);
    CHECK(sv[0] == 0);
    uint8_t rgb[3];
    diverging_rgb(0, rgb);
    CHECK(rgb[0] == 255 && rgb[1] == 255 && rgb[2] == 255);
    diverging_rgb(-1, rgb);
    CHECK(rgb[2] > rgb[0]);
    diverging_rgb(1, rgb);
    CHECK(rgb[0] > rgb[2]);
    gpt_free(&model);
    vocab_free(&vocab);
}

// ---- Unifont labels

// The rows of cp straight from the .hex file (0 if absent), as 16-bit rows.
static int hex_glyph(const char *path, uint32_t cp, uint16_t rows[16]) {
    char *text = read_text_file(path), key[16];
    if (!text) return 0;
    snprintf(key, sizeof key, "\n%04X:", cp);
    char *line = strstr(text, key);
    int width = 0;
    if (line) {
        line += strlen(key);
        size_t digits = strcspn(line, "\n");
        width = digits == 64 ? 16 : 8;
        for (int y = 0; y < 16; y++) {
            char part[5] = {0};
            memcpy(part, line + y * (width / 4), width / 4);
            unsigned v = (unsigned)strtoul(part, NULL, 16);
            rows[y] = (uint16_t)(width == 8 ? v << 8 : v);
        }
    }
    free(text);
    return width;
}

static void test_unifont_labels(void) {
    if (!file_exists(UNIFONT_DEFAULT_PATH)) {
        skip_test("unifont not installed");
        return;
    }
    char err[512];
    CHECK_MSG(label_font_select(UNIFONT_DEFAULT_PATH, err, sizeof err), "%s", err);
    GPT model;
    Vocab vocab;
    build_text_model(&model, &vocab, VOCAB_TEXT, 24, weights);
    // 'A' and 한 (U+D55C) at a cell of 17 px: each glyph as the font file
    // draws it; at the default cell of 12 px: shrunk to 11 px, in one row
    uint32_t chars[24];
    int tokens[24], T = 0;
    const char *ascii = "A quick fox";
    for (const char *c = ascii; *c; c++) chars[T++] = (unsigned char)*c;
    chars[T++] = 0xD55C;
    chars[T++] = 'x';
    for (int i = 0; i < T; i++) tokens[i] = vocab_id(&vocab, chars[i]) < 0 ? 0 : vocab_id(&vocab, chars[i]);
    gpt_alloc_inference(&model, 1, T);
    gpt_forward(&model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    for (int cell = 17; cell >= 12; cell -= 5) {
        const char *dir = make_temp_dir();
        HeatmapOptions opts = heatmap_default_options();
        opts.layer = 0;
        opts.head = 0;
        opts.cell = cell;
        CHECK_MSG(heatmaps_write(dir, &model, chars, T, &opts, err, sizeof err), "%s", err);
        char path[512];
        snprintf(path, sizeof path, "%s/layer0_head0.png", dir);
        int width, height, channels;
        uint8_t *img = stbi_load(path, &width, &height, &channels, 3);
        CHECK(img);
        HeadLayout l;
        heatmap_head_layout(T, cell, 2, 2, &l);
        CHECK(l.label_every == 1 && l.label_scale == 1 && l.label_fit == (cell == 17 ? 0 : 11));
        CHECK(img && width == l.width && height == l.height);
        for (int which = 0; img && which < 2; which++) {
            int i = which ? T - 2 : 0; // 한, then A
            uint16_t rows[16];
            int w = hex_glyph(UNIFONT_DEFAULT_PATH, chars[i], rows);
            CHECK(w == (which ? 16 : 8));
            int shown_w = w, shown_h = 16;
            if (l.label_fit) shown_w = (w * 11 + 15) / 16, shown_h = 11;
            LabelPlace at;
            heatmap_label_place(&l, i, shown_w, shown_h, &at);
            int wrong = 0, inked = 0;
            if (!l.label_fit) { // the glyph, pixel for pixel
                for (int y = 0; y < 16; y++)
                    for (int x = 0; x < w; x++) {
                        int on = (rows[y] >> (15 - x)) & 1;
                        const uint8_t *top = img + ((size_t)(at.top_y + y) * width + at.top_x + x) * 3;
                        const uint8_t *left = img + ((size_t)(at.left_y + y) * width + at.left_x + x) * 3;
                        int top_ink = top[0] < 80, left_ink = left[0] < 80;
                        int top_white = top[0] == 255 && top[1] == 255, left_white = left[0] == 255 && left[1] == 255;
                        wrong += on ? !(top_ink && left_ink) : !(top_white && left_white);
                        inked += on;
                    }
            } else { // shrunk: dark ink inside its box, inside its cell's width
                for (int y = 0; y < shown_h; y++)
                    for (int x = 0; x < shown_w; x++) {
                        const uint8_t *top = img + ((size_t)(at.top_y + y) * width + at.top_x + x) * 3;
                        inked += top[0] < 100;
                    }
                wrong = shown_w > cell - 1 || at.top_x < l.grid_x + i * cell ||
                        at.top_x + shown_w > l.grid_x + (i + 1) * cell;
            }
            CHECK_MSG(wrong == 0 && inked > 5, "cell %d, U+%04X: %d pixels differ, %d inked", cell,
                      chars[i], wrong, inked);
        }
        stbi_image_free(img);
    }
    // one row of labels, none overlapping another, at any cell size
    for (int cell = 1; cell <= 40; cell++) {
        HeadLayout l;
        heatmap_head_layout(T, cell, 2, 2, &l);
        LabelPlace a, b;
        int s = l.label_fit ? l.label_fit : 16 * l.label_scale; // a 16 px wide glyph's size
        for (int i = 0; i < T; i += l.label_every)
            for (int j = i + l.label_every; j < T; j += l.label_every) {
                heatmap_label_place(&l, i, s, s, &a);
                heatmap_label_place(&l, j, s, s, &b);
                CHECK_MSG(a.top_y == b.top_y && a.left_x == b.left_x, "cell %d: two rows", cell);
                int top = abs(a.top_x - b.top_x) < s, left = abs(a.left_y - b.left_y) < s;
                CHECK_MSG(!top && !left, "cell %d: labels %d and %d overlap", cell, i, j);
            }
        CHECK(l.grid_x >= l.left_label_x + s && l.grid_y >= l.top_label_y + s); // strips clear of the grid
    }
    gpt_free(&model);
    vocab_free(&vocab);
}

static void test_font_errors(void) {
    char err[512];
    CHECK(!label_font_select("/nonexistent/unifont.hex", err, sizeof err));
    CHECK_MSG(strstr(err, "/nonexistent/unifont.hex") && strstr(err, "cannot read"), "%s", err);
    const char *dir = make_temp_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/bad.hex", dir);
    const char *bad = "0041:0000000018242442427E424242420000\n0042:12345\n";
    write_file_bytes(path, bad, strlen(bad));
    CHECK(!label_font_select(path, err, sizeof err));
    CHECK_MSG(strstr(err, ":2:"), "%s", err);
    Unifont font;
    snprintf(path, sizeof path, "%s/good.hex", dir);
    const char *good = "0041:0000000018242442427E424242420000\n";
    write_file_bytes(path, good, strlen(good));
    CHECK_MSG(unifont_load(&font, path, err, sizeof err), "%s", err);
    uint16_t rows[16];
    CHECK(unifont_glyph(&font, 'A', rows) == 8 && rows[5] == 0x2400 && !unifont_glyph(&font, 'B', rows));
    unifont_free(&font);
    // bin/attn names the missing font, the unreadable snapshot folder, the
    // character outside the vocabulary
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    char cmd[2048], log[512];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    struct {
        const char *args, *says;
    } cases[] = {
        {"--text 'to be' --font /nonexistent/u.hex", "/nonexistent/u.hex: cannot read the font"},
        {"--text 'to be' --html --snapshots /nonexistent/attn", "cannot read the snapshot folder"},
        {"--text 'to \xED\x95\x9C be'", "U+D55C"},
    };
    for (int c = 0; c < 3; c++) {
        snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --out %s/out%d %s", ckpt, dir, c, cases[c].args);
        CHECK_MSG(run_command(cmd, log) == 1, "%s", cases[c].args);
        char *said = read_text_file(log);
        CHECK_MSG(said && strstr(said, cases[c].says), "%s said: %s", cases[c].args, said ? said : "");
        free(said);
    }
    label_font_select(NULL, err, sizeof err);
}

// "name size mtime" of every file under dir, sorted (NULL if dir is
// missing): what "left untouched" is checked against.
static char *tree_listing(const char *dir, const char *scratch) {
    char cmd[1200], list[600];
    snprintf(list, sizeof list, "%s/listing.txt", scratch);
    snprintf(cmd, sizeof cmd, "find %s -printf '%%P %%s %%T@\\n' | sort", dir);
    if (!file_exists(dir) || run_command(cmd, list) != 0) return NULL;
    return read_text_file(list);
}

// bin/attn checks every input before it writes anything: a bad --snapshots
// (missing, a regular file, a folder with a damaged snapshot, a folder it
// may not read), font or text exits 1 with one line naming it, and leaves
// the output folder as it was: not created when missing, its files (names,
// sizes, times) unchanged when it holds some. The one line even when notes
// are due (without Unifont, a text longer than the context): they follow
// the checks.
static void test_attn_checks_before_writing(void) {
    const char *dir = make_temp_dir();
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    char plain_file[512], damaged[512], locked[512], path[700], cmd[4096], log[512];
    snprintf(plain_file, sizeof plain_file, "%s/not_a_folder", dir);
    write_file_bytes(plain_file, "x\n", 2);
    snprintf(damaged, sizeof damaged, "%s/damaged", dir);
    snprintf(path, sizeof path, "mkdir -p %s/step_5 %s/locked", damaged, dir);
    CHECK(run_command(path, NULL) == 0);
    snprintf(path, sizeof path, "%s/step_5/atlas.safetensors", damaged);
    write_file_bytes(path, "\x10\0\0\0\0\0\0\0{\"a\":1}", 15);
    snprintf(locked, sizeof locked, "%s/locked", dir);
    chmod(locked, 0);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    char missing_arg[600], file_arg[600], damaged_arg[600], locked_arg[600];
    snprintf(missing_arg, sizeof missing_arg, "--html --snapshots %s/none", dir);
    snprintf(file_arg, sizeof file_arg, "--html --snapshots %s", plain_file);
    snprintf(damaged_arg, sizeof damaged_arg, "--html --snapshots %s", damaged);
    snprintf(locked_arg, sizeof locked_arg, "--html --snapshots %s", locked);
    char long_text_arg[700]; // 25 characters, the context 16
    snprintf(long_text_arg, sizeof long_text_arg, "--text 'to be or not to be or not' %s", missing_arg);
    struct {
        const char *args, *says;
        int needs_non_root; // root reads a mode-000 folder all the same
    } cases[] = {
        {missing_arg, "cannot read the snapshot folder", 0},
        {file_arg, "Not a directory", 0},
        {damaged_arg, "step_5", 0},
        {locked_arg, "Permission denied", 1},
        {"--font /nonexistent/u.hex", "/nonexistent/u.hex", 0},
        {"--text 'to \xED\x95\x9C be' --html", "U+D55C", 0},
        {long_text_arg, "cannot read the snapshot folder", 0},
    };
    int as_root = geteuid() == 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (cases[c].needs_non_root && as_root) continue;
        const char *text = strstr(cases[c].args, "--text") ? "" : "--text 'to be'";
        for (int existing = 0; existing < 2; existing++) {
            char out[600];
            snprintf(out, sizeof out, "%s/out%zu_%d", dir, c, existing);
            if (existing) { // a folder of the user's, with a picture bin/attn would overwrite
                snprintf(path, sizeof path, "mkdir -p %s", out);
                CHECK(run_command(path, NULL) == 0);
                snprintf(path, sizeof path, "%s/overview.png", out);
                write_file_bytes(path, "mine\n", 5);
            }
            char *before = tree_listing(out, dir);
            snprintf(cmd, sizeof cmd, "GPT_UNIFONT=%s/missing.hex bin/attn --ckpt %s --out %s %s %s",
                     dir, ckpt, out, text, cases[c].args);
            int status = run_command(cmd, log);
            char *said = read_text_file(log), *after = tree_listing(out, dir);
            CHECK_MSG(status == 1, "%s: exit %d", cases[c].args, status);
            CHECK_MSG(said && strstr(said, cases[c].says) && strchr(said, '\n') == said + strlen(said) - 1,
                      "%s said: %s", cases[c].args, said ? said : "");
            if (existing)
                CHECK_MSG(before && strstr(before, "overview.png 5 ") && after && !strcmp(before, after), "%s: %s changed:\n%s\nto\n%s",
                          cases[c].args, out, before ? before : "", after ? after : "");
            else
                CHECK_MSG(!file_exists(out), "%s: created %s", cases[c].args, out);
            free(said), free(before), free(after);
        }
    }
    chmod(locked, 0755);
    if (as_root) // the rest ran; this case cannot fail as root
        printf("    (as root, which reads a mode-000 folder: that --snapshots case left out)\n");
}

// Without Unifont at the default path (GPT_UNIFONT points it at a missing
// file) the labels use the built-in font, said once on stderr, and the
// pictures are written.
static void test_font_fallback_note(void) {
    const char *dir = make_temp_dir();
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    char cmd[2048], log[512], path[600];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(cmd, sizeof cmd, "GPT_UNIFONT=%s/missing.hex bin/attn --ckpt %s --out %s/out "
             "--text 'to be or not' --html", dir, ckpt, dir);
    CHECK(run_command(cmd, log) == 0);
    char *said = read_text_file(log), note[600];
    snprintf(note, sizeof note, "note: %s/missing.hex not found (Debian package unifont): labels "
             "use the built-in ASCII font", dir);
    const char *first = said ? strstr(said, note) : NULL;
    CHECK_MSG(first && !strstr(first + strlen(note), "not found"), "said: %s", said ? said : "");
    free(said);
    snprintf(path, sizeof path, "%s/out/overview.png", dir);
    CHECK(file_exists(path));
    // in this process too: the built-in font's box, not Unifont's
    char err[512];
    snprintf(path, sizeof path, "%s/missing.hex", dir);
    setenv("GPT_UNIFONT", path, 1);
    CHECK(!strcmp(label_font_default_path(), path));
    CHECK(label_font_select(NULL, err, sizeof err));
    int w, h;
    label_font_box(&w, &h);
    CHECK(!label_font_is_unifont() && w == FONT_W && h == FONT_H);
    unsetenv("GPT_UNIFONT");
    CHECK(!strcmp(label_font_default_path(), UNIFONT_DEFAULT_PATH));
    label_font_select(NULL, err, sizeof err);
}

// ---- training snapshots

// The lines of a file, or -1 when it cannot be read.
static int file_lines(const char *path) {
    char *text = read_text_file(path);
    if (!text) return -1;
    int lines = 0;
    for (char *c = text; *c; c++) lines += *c == '\n';
    free(text);
    return lines;
}

static void test_training_snapshots(void) {
    const char *dir = make_temp_dir();
    char cmd[2048], path[512];
    // a probe longer than the context: one line, exit 2, no folder
    snprintf(cmd, sizeof cmd, "bin/train --layers 2 --heads 2 --dim 16 --context 16 --iters 30 "
             "--heatmaps-every 10 --probe 'to be or not to be, that is' --out %s/long", dir);
    snprintf(path, sizeof path, "%s/long.log", dir);
    CHECK(run_command(cmd, path) == 2);
    char *said = read_text_file(path);
    CHECK_MSG(said && strstr(said, "--probe: 27 characters, longer than the context (16)") &&
                  count_lines(said) == 1, "said: %s", said ? said : "");
    free(said);
    snprintf(path, sizeof path, "%s/long", dir);
    CHECK(!file_exists(path));

    snprintf(cmd, sizeof cmd, "bin/train --layers 2 --heads 2 --dim 16 --context 16 --batch 4 "
             "--eval-batches 2 --iters 30 --eval-every 30 --heatmaps-every 10 --probe 'to be or not to' "
             "--out %s/run", dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(path, sizeof path, "%s/run/attn/scores.csv", dir);
    char *csv = read_text_file(path);
    CHECK_MSG(csv, "no %s", path);
    if (csv) {
        CHECK_MSG(count_lines(csv) == 1 + 3 * 4, "%d lines", count_lines(csv)); // 3 snapshots x 4 heads
        CHECK(!strncmp(csv, "step,loss,layer,head,previous_token,previous_token_uniform", 58));
        CHECK(strstr(csv, ",copying,copying_random,k_composition,k_composition_random,dominant\n"));
        CHECK(strstr(csv, "\n10,") && strstr(csv, "\n30,"));
        free(csv);
    }
    const char *names[] = {"timeline.png", "phase_change.png", "filmstrip_layer0_head0.png",
                           "filmstrip_layer1_head1.png", "step_20/atlas.safetensors", "step_20/overview.png"};
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/run/attn/%s", dir, names[i]);
        CHECK_MSG(file_exists(path), "no %s", path);
    }
    // the pictures drawn from every snapshot were drawn after the last one
    // (snapshots may leave them to the end of the run: progress.h)
    struct stat last, picture;
    snprintf(path, sizeof path, "%s/run/attn/step_30/atlas.safetensors", dir);
    CHECK(stat(path, &last) == 0);
    const char *drawn[] = {"timeline.png", "phase_change.png", "filmstrip_layer1_head1.png"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/run/attn/%s", dir, drawn[i]);
        CHECK(stat(path, &picture) == 0);
        CHECK_MSG(picture.st_mtim.tv_sec > last.st_mtim.tv_sec ||
                      (picture.st_mtim.tv_sec == last.st_mtim.tv_sec &&
                       picture.st_mtim.tv_nsec >= last.st_mtim.tv_nsec),
                  "%s is older than the last snapshot", drawn[i]);
    }
    // the model's measures: a row per snapshot; the loss at each of the 16
    // positions; each of layer 0's 2 heads into each of layer 1's
    snprintf(path, sizeof path, "%s/run/attn/icl.csv", dir);
    CHECK_MSG(file_lines(path) == 1 + 3, "icl.csv: %d lines", file_lines(path));
    snprintf(path, sizeof path, "%s/run/attn/position_loss.csv", dir);
    CHECK_MSG(file_lines(path) == 1 + 3 * 16, "position_loss.csv: %d lines", file_lines(path));
    snprintf(path, sizeof path, "%s/run/attn/composition.csv", dir);
    CHECK_MSG(file_lines(path) == 1 + 3 * 2 * 2, "composition.csv: %d lines", file_lines(path));
    // the ICL score is the late position's loss minus the early one's (16:
    // positions 2 and 15), as position_loss.csv has them
    snprintf(path, sizeof path, "%s/run/attn/icl.csv", dir);
    csv = read_text_file(path);
    char *row = csv ? strstr(csv, "\n30,") : NULL;
    double loss = NAN, early_loss = NAN, late_loss = NAN, icl = NAN, sink = NAN, sink_uniform = NAN;
    int early = -1, late = -1;
    CHECK(row && sscanf(row + 1, "30,%lf,%d,%d,%lf,%lf,%lf,%lf,%lf", &loss, &early, &late, &early_loss,
                        &late_loss, &icl, &sink, &sink_uniform) == 8);
    CHECK(early == 2 && late == 15);
    CHECK_NEAR(icl, late_loss - early_loss, 2e-6);
    CHECK(sink >= 0 && sink <= 1 && sink_uniform == 0);
    free(csv);
    snprintf(path, sizeof path, "%s/run/attn/position_loss.csv", dir);
    csv = read_text_file(path);
    char want[64];
    snprintf(want, sizeof want, "\n30,15,%.6f\n", late_loss);
    CHECK_MSG(csv && strstr(csv, want), "no row %s", want + 1);
    free(csv);
    // the induction probe as text: n = 8 distinct characters (of the
    // corpus), then the same 8
    snprintf(path, sizeof path, "%s/run/attn/induction_probe.txt", dir);
    char *probe = read_text_file(path);
    CHECK_MSG(probe && strlen(probe) == 16 && !memcmp(probe, probe + 8, 8), "probe: %s", probe ? probe : "");
    for (int i = 0; probe && i < 8; i++)
        for (int j = 0; j < i; j++) CHECK(probe[i] != probe[j]);
    free(probe);
    // a scores.csv that is not ours is rebuilt from the snapshots on the next
    // one; the other CSVs keep their rows of the steps before the resume
    snprintf(path, sizeof path, "%s/run/attn/scores.csv", dir);
    write_file_bytes(path, "garbage\n", 8);
    snprintf(cmd, sizeof cmd, "bin/train --iters 40 --resume --out %s/run", dir);
    CHECK(run_command(cmd, NULL) == 0);
    csv = read_text_file(path);
    if (csv) {
        CHECK_MSG(count_lines(csv) == 1 + 4 * 4, "%d lines after the resume", count_lines(csv));
        CHECK(strstr(csv, "\n10,") && strstr(csv, "\n40,"));
        free(csv);
    }
    snprintf(path, sizeof path, "%s/run/attn/icl.csv", dir);
    CHECK_MSG(file_lines(path) == 1 + 4, "icl.csv after the resume: %d lines", file_lines(path));
    snprintf(path, sizeof path, "%s/run/attn/composition.csv", dir);
    CHECK_MSG(file_lines(path) == 1 + 4 * 4, "composition.csv after the resume: %d lines",
              file_lines(path));
    // the explorer finds them beside the checkpoint: its slider has 1 + 4 views
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s/run/model.safetensors --text 'to be or not' --out %s/x --html",
             dir, dir);
    snprintf(path, sizeof path, "%s/x.log", dir);
    CHECK(run_command(cmd, path) == 0);
    said = read_text_file(path);
    CHECK_MSG(said && strstr(said, "(4 training snapshots)"), "said: %s", said ? said : "");
    // each snapshot's ICL score and sink rate from icl.csv; none for the text
    snprintf(path, sizeof path, "%s/x/index.html", dir);
    char *page = read_text_file(path);
    int unknown = 0, known = 0;
    for (char *at = page; at && (at = strstr(at, "\"icl\":")); at++)
        at[6] == 'n' ? unknown++ : known++;
    CHECK_MSG(unknown == 1 && known == 4, "ICL scores: %d known, %d unknown", known, unknown);
    free(page);
    free(said);
}

// ---- Olsson's measures

// Sorted by real part, then imaginary: two spectra compare entry by entry.
static int by_real_then_imaginary(const void *a, const void *b) {
    const double *x = a, *y = b;
    if (fabs(x[0] - y[0]) > 1e-6) return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

// The largest distance between the eigenvalues matrix_eigenvalues finds
// for S D S^-1 and D's own, D block diagonal with the given 1x1 blocks
// (real) and 2x2 blocks [[a, -b], [b, a]] (a +- bi); S = I + 0.3 N(0,1).
static double spectrum_error(const double *real, int reals, const double (*pairs)[2], int npairs,
                             uint64_t seed) {
    int n = reals + 2 * npairs;
    double *d = calloc((size_t)n * n, sizeof(double)), *sm = malloc(sizeof(double) * n * n);
    double *inv = malloc(sizeof(double) * n * n), *a = calloc((size_t)n * n, sizeof(double));
    double *want = malloc(sizeof(double) * 2 * n), *got = malloc(sizeof(double) * 2 * n);
    double *re = malloc(sizeof(double) * n), *im = malloc(sizeof(double) * n);
    for (int i = 0; i < reals; i++) {
        d[i * n + i] = real[i];
        want[2 * i] = real[i], want[2 * i + 1] = 0;
    }
    for (int p = 0; p < npairs; p++) {
        int i = reals + 2 * p;
        d[i * n + i] = d[(i + 1) * n + i + 1] = pairs[p][0];
        d[i * n + i + 1] = -pairs[p][1], d[(i + 1) * n + i] = pairs[p][1];
        want[2 * i] = want[2 * i + 2] = pairs[p][0];
        want[2 * i + 1] = pairs[p][1], want[2 * i + 3] = -pairs[p][1];
    }
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < n * n; i++) sm[i] = (i % (n + 1) == 0) + 0.3 * rng_normal(&rng);
    // inv = S^-1 by Gauss-Jordan with partial pivoting, in a copy of S
    double *work = malloc(sizeof(double) * n * n);
    memcpy(work, sm, sizeof(double) * n * n);
    for (int i = 0; i < n * n; i++) inv[i] = i % (n + 1) == 0;
    for (int c = 0; c < n; c++) {
        int pivot = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(work[r * n + c]) > fabs(work[pivot * n + c])) pivot = r;
        for (int j = 0; j < n; j++) {
            double t = work[c * n + j]; work[c * n + j] = work[pivot * n + j]; work[pivot * n + j] = t;
            t = inv[c * n + j]; inv[c * n + j] = inv[pivot * n + j]; inv[pivot * n + j] = t;
        }
        double diag = work[c * n + c];
        for (int j = 0; j < n; j++) work[c * n + j] /= diag, inv[c * n + j] /= diag;
        for (int r = 0; r < n; r++)
            if (r != c) {
                double f = work[r * n + c];
                for (int j = 0; j < n; j++) work[r * n + j] -= f * work[c * n + j], inv[r * n + j] -= f * inv[c * n + j];
            }
    }
    for (int i = 0; i < n; i++) // a = S D S^-1
        for (int j = 0; j < n; j++) {
            double sum = 0;
            for (int k = 0; k < n; k++)
                for (int l = 0; l < n; l++) sum += sm[i * n + k] * d[k * n + l] * inv[l * n + j];
            a[i * n + j] = sum;
        }
    double worst = INFINITY;
    if (matrix_eigenvalues(a, n, re, im)) {
        for (int i = 0; i < n; i++) got[2 * i] = re[i], got[2 * i + 1] = im[i];
        qsort(want, n, 2 * sizeof(double), by_real_then_imaginary);
        qsort(got, n, 2 * sizeof(double), by_real_then_imaginary);
        worst = 0;
        for (int i = 0; i < n; i++) worst = fmax(worst, hypot(got[2 * i] - want[2 * i], got[2 * i + 1] - want[2 * i + 1]));
    }
    free(d), free(sm), free(inv), free(a), free(want), free(got), free(re), free(im), free(work);
    return worst;
}

static void test_eigenvalues(void) {
    const double one[1] = {-2.5};
    CHECK_NEAR(spectrum_error(one, 1, NULL, 0, 1), 0, 1e-12);
    const double pair[1][2] = {{0.5, 2.0}};
    CHECK_NEAR(spectrum_error(NULL, 0, pair, 1, 2), 0, 1e-10);
    const double reals[5] = {3, -1, 0, 0.25, 7};
    const double pairs[4][2] = {{1, 1}, {-2, 0.5}, {0, 3}, {0.1, 0.01}};
    CHECK_NEAR(spectrum_error(reals, 5, pairs, 4, 3), 0, 1e-8);
    // 32 eigenvalues, as a head of 32 channels has: distinct, spread
    double many_reals[12], many_pairs[10][2];
    for (int i = 0; i < 12; i++) many_reals[i] = -3 + 0.55 * i;
    for (int p = 0; p < 10; p++) many_pairs[p][0] = 1 - 0.3 * p, many_pairs[p][1] = 0.2 + 0.4 * p;
    CHECK_NEAR(spectrum_error(many_reals, 12, (const double(*)[2])many_pairs, 10, 4), 0, 1e-7);
    // a Jordan block: 2 twice, found to about sqrt(eps)
    double jordan[4] = {2, 1, 0, 2}, re[2], im[2];
    CHECK(matrix_eigenvalues(jordan, 2, re, im));
    CHECK_NEAR(re[0], 2, 1e-6);
    CHECK_NEAR(re[1], 2, 1e-6);
    // the zero matrix: every eigenvalue 0
    double zero[9] = {0}, re3[3], im3[3];
    CHECK(matrix_eigenvalues(zero, 3, re3, im3));
    for (int i = 0; i < 3; i++) CHECK(re3[i] == 0 && im3[i] == 0);
}

// The copying score from M itself, (V,V) in double, built from its
// definition (induction_measures.h): M[b][c] = (F W_O,h W_V,h e_b) . u_c,
// F the final norm's gain (and centring for LayerNorm); its eigenvalues by
// the same solver, but of the full (V,V) matrix, not the (hs,hs) product.
static double copying_reference(const GPT *model, int layer, int head) {
    const GPTConfig *cfg = &model->config;
    int C = cfg->dim, hs = C / cfg->heads, V = cfg->vocab_size;
    const float *wv = model->params.w_v + (size_t)layer * C * C, *wo = model->params.w_o + (size_t)layer * C * C;
    const float *wu = param_tensor(&model->params, gpt_unembedding(cfg));
    double *m = malloc(sizeof(double) * V * V), *out = malloc(sizeof(double) * C);
    for (int b = 0; b < V; b++) {
        const float *e = model->params.wte + (size_t)b * C;
        double mean = 0;
        for (int c2 = 0; c2 < C; c2++) {
            double o = 0;
            for (int d = head * hs; d < (head + 1) * hs; d++) {
                double v = 0;
                for (int c = 0; c < C; c++) v += (double)wv[d * C + c] * e[c];
                o += (double)wo[c2 * C + d] * v;
            }
            out[c2] = o;
            mean += o / C;
        }
        for (int c2 = 0; c2 < C; c2++)
            out[c2] = (out[c2] - (cfg->norm == NORM_LAYERNORM ? mean : 0)) * model->params.lnf_w[c2];
        for (int t = 0; t < V; t++) {
            double sum = 0;
            for (int c2 = 0; c2 < C; c2++) sum += out[c2] * wu[(size_t)t * C + c2];
            m[b * V + t] = sum;
        }
    }
    double trace = 0;
    for (int b = 0; b < V; b++) trace += m[b * V + b];
    double *re = malloc(sizeof(double) * 2 * V), *im = re + V, real = 0, size = 0;
    CHECK(matrix_eigenvalues(m, V, re, im));
    for (int i = 0; i < V; i++) real += re[i], size += hypot(re[i], im[i]);
    CHECK_NEAR(real, trace, 1e-9 * (1 + fabs(trace))); // the eigenvalues' sum is the trace
    free(m), free(out), free(re);
    return real / size;
}

// |W_QK,to W_OV,from|_F / (|W_QK,to|_F |W_OV,from|_F) from the (C,C)
// matrices themselves.
static double k_composition_reference(const GPT *model, int fl, int fh, int tl, int th) {
    int C = model->config.dim, hs = C / model->config.heads;
    const float *wq = model->params.w_q + (size_t)tl * C * C, *wk = model->params.w_k + (size_t)tl * C * C;
    const float *wv = model->params.w_v + (size_t)fl * C * C, *wo = model->params.w_o + (size_t)fl * C * C;
    double *qk = calloc((size_t)C * C, sizeof(double)), *ov = calloc((size_t)C * C, sizeof(double));
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++)
            for (int d = 0; d < hs; d++) {
                qk[i * C + j] += (double)wq[(th * hs + d) * C + i] * wk[(th * hs + d) * C + j];
                ov[i * C + j] += (double)wo[i * C + fh * hs + d] * wv[(fh * hs + d) * C + j];
            }
    double both = 0, nq = 0, no = 0;
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) {
            double sum = 0;
            for (int k = 0; k < C; k++) sum += qk[i * C + k] * ov[k * C + j];
            both += sum * sum, nq += qk[i * C + j] * qk[i * C + j], no += ov[i * C + j] * ov[i * C + j];
        }
    free(qk), free(ov);
    return sqrt(both / (nq * no));
}

static void test_copying_and_composition(void) {
    for (int norm = 0; norm < 2; norm++) {
        GPTConfig cfg = {.vocab_size = 11, .context = 8, .layers = 3, .heads = 2, .dim = 16,
                         .norm = norm ? NORM_RMSNORM : NORM_LAYERNORM};
        GPT model;
        build_model(&model, &cfg, (RandomWeights){7 + norm, 0.3f, 8});
        double worst = 0, worst_k = 0;
        HeadScores scores[6];
        double table[36];
        weight_head_scores(&model, NAN, scores, table);
        for (int h = 0; h < 6; h++) {
            double want = copying_reference(&model, h / 2, h % 2);
            double got = head_copying_score(&model, h / 2, h % 2);
            worst = fmax(worst, fabs(got - want));
            CHECK(got >= -1 && got <= 1);
            CHECK(scores[h].value[SCORE_COPYING] == got && scores[h].uniform[SCORE_COPYING] == 0);
            double best = NAN;
            for (int from = 0; from < 6; from++) {
                double k = table[from * 6 + h];
                if (from / 2 >= h / 2) {
                    CHECK(isnan(k));
                    continue;
                }
                double ref = k_composition_reference(&model, from / 2, from % 2, h / 2, h % 2);
                worst_k = fmax(worst_k, fabs(k - ref));
                CHECK(k > 0 && k <= 1);
                if (!(k <= best)) best = k;
            }
            if (h < 2) CHECK(isnan(scores[h].value[SCORE_K_COMPOSITION]));
            else CHECK(scores[h].value[SCORE_K_COMPOSITION] == best);
        }
        CHECK_MSG(worst < 1e-9, "copying score: %g from the (V,V) reference", worst);
        CHECK_MSG(worst_k < 1e-12, "K-composition: %g from the (C,C) reference", worst_k);
        gpt_free(&model);
    }
    // built to copy: one-hot embeddings (tied), RMSNorm with gain 1, head 0
    // writes back what it reads (W_O,0 = W_V,0^T, a projection): every
    // eigenvalue >= 0, the score 1; with W_O,0 = -W_V,0^T, -1
    GPTConfig cfg = {.vocab_size = 6, .context = 8, .layers = 2, .heads = 2, .dim = 8,
                     .norm = NORM_RMSNORM};
    GPT model;
    build_model(&model, &cfg, (RandomWeights){9, 0.0f, 0});
    int C = 8, hs = 4;
    memset(model.params.wte, 0, sizeof(float) * 6 * C);
    for (int v = 0; v < 6; v++) model.params.wte[v * C + v] = 1;
    for (int c = 0; c < C; c++) model.params.lnf_w[c] = 1;
    for (int sign = 1; sign >= -1; sign -= 2) {
        for (int d = 0; d < hs; d++)
            for (int c = 0; c < C; c++) {
                model.params.w_v[d * C + c] = (c == (d + 1) % C) * 0.5f + (c == d) * 0.25f;
                model.params.w_o[c * C + d] = sign * model.params.w_v[d * C + c];
            }
        CHECK_NEAR(head_copying_score(&model, 0, 0), sign, 1e-12);
    }
    // K-composition 1 when the earlier head writes into exactly what the
    // later head's keys read (rank 1 each), 0 when into what they ignore
    memset(model.params.w_q, 0, sizeof(float) * 2 * C * C);
    memset(model.params.w_k, 0, sizeof(float) * 2 * C * C);
    memset(model.params.w_v, 0, sizeof(float) * 2 * C * C);
    memset(model.params.w_o, 0, sizeof(float) * 2 * C * C);
    float *wq1 = model.params.w_q + C * C, *wk1 = model.params.w_k + C * C;
    wq1[0 * C + 1] = 1;     // head 0 of layer 1: queries read channel 1,
    wk1[0 * C + 2] = 2;     // keys channel 2
    model.params.w_v[0 * C + 5] = 3;  // layer 0 head 0 reads channel 5
    model.params.w_o[2 * C + 0] = -1; // and writes channel 2: the keys'
    model.params.w_v[hs * C + 6] = 1; // head 1 reads channel 6
    model.params.w_o[3 * C + hs] = 1; // and writes channel 3: unread
    CHECK_NEAR(k_composition(&model, 0, 0, 1, 0), 1.0, 1e-12);
    CHECK_NEAR(k_composition(&model, 0, 1, 1, 0), 0.0, 1e-12);
    gpt_free(&model);
    // random matrices: the same value every time, between the extremes,
    // lower the more channels there are to miss (hs fixed)
    double r16 = k_composition_random(16, 4), r64 = k_composition_random(64, 4);
    CHECK(r16 == k_composition_random(16, 4));
    CHECK_MSG(r16 > 0 && r16 < 1 && r64 < r16, "random K-composition %g (C 16), %g (C 64)", r16, r64);
    // Olsson et al.'s positions 50 and 500 of 512, scaled
    int early, late;
    icl_positions(512, &early, &late);
    CHECK(early == 50 && late == 500);
    icl_positions(256, &early, &late);
    CHECK(early == 25 && late == 250);
    icl_positions(2, &early, &late);
    CHECK(early == 0 && late == 1);
}

// ---- the explorer in headless Chromium

static void test_explorer_in_chromium(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[4096], path[512];
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text 'It was the best of' --out %s --html", ckpt, dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(path, sizeof path, "%s/index.html", dir);
    char *page = read_text_file(path);
    CHECK(page);
    if (!page) return;
    CHECK(page_fetches_nothing(page));
    free(page);
    const char *chromium = find_chromium();
    if (!chromium) {
        skip_test("chromium not installed");
        return;
    }
    // the weight the C code computes for layer 1, head 0, query 14, key 9
    GPT model;
    Vocab vocab;
    char err[512];
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    const char *text = "It was the best of"; // 18 characters, the last 16 are used
    int tokens[16];
    for (int i = 0; i < 16; i++) tokens[i] = vocab_id(&vocab, (unsigned char)text[2 + i]);
    gpt_alloc_inference(&model, 1, 16);
    gpt_forward(&model, tokens, 1, 16, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    double want = gpt_attention_probs(&model, 1, 0, 0)[14 * 16 + 9];
    gpt_free(&model);
    vocab_free(&vocab);

    char *dom = chromium_dom(chromium, dir, "index.html#layer=1&head=0&q=14&k=9");
    if (dom) {
        char *r = strstr(dom, "id=\"readout\"");
        CHECK_MSG(r, "no readout in the DOM");
        char *weight = r ? strstr(dom, "data-weight=\"") : NULL;
        CHECK_MSG(weight, "no weight in the readout");
        if (weight) {
            double shown = atof(weight + strlen("data-weight=\""));
            CHECK_MSG(fabs(shown - want) <= 5.1e-7, "readout %g, the C code computed %.9g", shown, want);
        }
        CHECK_MSG(r && strstr(r, "position 14") && strstr(r, "position 9"), "readout lacks the positions");
        CHECK_MSG(strstr(dom, "data-ready=\"1\""), "the page's script did not finish");
        CHECK_MSG(strstr(dom, "data-resources=\"0\""), "the page fetched resources");
        CHECK_MSG(!strstr(dom, "Content Security Policy") && !strstr(dom, "Refused to") &&
                  !strstr(dom, "Uncaught"), "the page tried a request or failed: %.2000s", dom);
        free(dom);
    }
    // the same checks see a page that does make requests (so they can fail)
    snprintf(path, sizeof path, "%s/requests.html", dir);
    const char *requests = "<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" "
                           "content=\"default-src 'none'; script-src 'unsafe-inline'\"></head><body>"
                           "<img src=\"http://192.0.2.1/x.png\"><script>document.body.dataset."
                           "resources=performance.getEntriesByType('resource').length;</script>"
                           "</body></html>";
    write_file_bytes(path, requests, strlen(requests));
    dom = chromium_dom(chromium, dir, "requests.html");
    CHECK_MSG(dom && strstr(dom, "Content Security Policy") && !strstr(dom, "data-resources=\"0\""),
              "a page with a request went unnoticed");
    free(dom);
    // a screenshot that is not blank: many colours (the viridis cells)
    const char *sandbox = geteuid() == 0 ? "--no-sandbox" : "";
    snprintf(path, sizeof path, "%s/shot.png", dir);
    snprintf(cmd, sizeof cmd, "%s --headless %s --disable-gpu --user-data-dir=%s/profile "
             "--virtual-time-budget=3000 --window-size=1000,800 --screenshot=%s "
             "'file://%s/index.html#layer=0&head=1'", chromium, sandbox, dir, path, dir);
    CHECK(run_command(cmd, NULL) == 0);
    int width, height, channels;
    uint8_t *img = stbi_load(path, &width, &height, &channels, 3);
    CHECK_MSG(img, "no screenshot");
    if (img) {
        int distinct = 0;
        static unsigned char seen[1 << 15];
        memset(seen, 0, sizeof seen);
        for (long p = 0; p < (long)width * height; p++) {
            int key = (img[3 * p] >> 3) << 10 | (img[3 * p + 1] >> 3) << 5 | img[3 * p + 2] >> 3;
            if (!seen[key]) {
                seen[key] = 1;
                distinct++;
            }
        }
        CHECK_MSG(distinct > 20, "the screenshot has %d colours", distinct);
        stbi_image_free(img);
    }
}

// ---- the timeline's and the phase change's layout

// Fake snapshots of L x NH heads, scores and model measures moving with the step.
static Snapshot *fake_snapshots(int count, int L, int NH) {
    Snapshot *snaps = xcalloc((size_t)count, sizeof(Snapshot));
    for (int i = 0; i < count; i++) {
        snaps[i].step = 100L * (i + 1);
        snaps[i].loss = 3.0 - 0.1 * i;
        snaps[i].icl = -0.05 * i;
        snaps[i].sink_rate = 0.1 * i;
        snaps[i].sink_uniform = 0.05;
        snaps[i].scores = xcalloc((size_t)L * NH, sizeof(HeadScores));
        for (int h = 0; h < L * NH; h++)
            for (int k = 0; k < NUM_SCORES; k++) {
                snaps[i].scores[h].value[k] = 0.02 * (h + 1) * (i + 1);
                snaps[i].scores[h].uniform[k] = 0.05;
            }
    }
    return snaps;
}

static void free_snapshots(Snapshot *snaps, int count) {
    for (int i = 0; i < count; i++) free(snaps[i].scores);
    free(snaps);
}

static int is_white(const Image *image, int x, int y) {
    const uint8_t *p = image->rgb + 3 * ((long)y * image->width + x);
    return p[0] == 255 && p[1] == 255 && p[2] == 255;
}

static long pixels_of(const Image *image, const uint8_t rgb[3]) {
    long n = 0;
    for (long i = 0; i < (long)image->width * image->height; i++)
        n += !memcmp(image->rgb + 3 * i, rgb, 3);
    return n;
}

// A 2-layer model's timeline: nothing runs off the right edge (the title
// was cut), the first row has its three panels (loss, ICL, the sink rate it
// announces), and the model's lines are not head 0's colour.
static void test_timeline_layout(void) {
    int count = 5, L = 2, NH = 4;
    Snapshot *snaps = fake_snapshots(count, L, NH);
    Image image;
    timeline_render(&image, snaps, count, L, NH);
    int clipped = 0;
    for (int y = 0; y < image.height; y++)
        for (int x = image.width - 4; x < image.width; x++) clipped += !is_white(&image, x, y);
    CHECK_MSG(clipped == 0, "%d pixels drawn in the last 4 columns (%d wide): something runs off the edge",
              clipped, image.width);
    // the first row's panels: frames across the width, three of them
    int frames = 0, y = -1;
    for (int row = 0; row < image.height && y < 0; row++) { // the first row of frame pixels
        long dark = 0;
        for (int x = 0; x < image.width; x++)
            dark += !memcmp(image.rgb + 3 * ((long)row * image.width + x), FRAME, 3);
        if (dark > 200) y = row;
    }
    CHECK(y >= 0);
    for (int x = 1; y >= 0 && x < image.width; x++)
        frames += !memcmp(image.rgb + 3 * ((long)y * image.width + x), FRAME, 3) &&
                  memcmp(image.rgb + 3 * ((long)y * image.width + x - 1), FRAME, 3);
    CHECK_MSG(frames == 3, "the first row has %d panels, want the loss, ICL and sink rate's 3", frames);
    static const uint8_t head0[3] = {31, 119, 180}, model[3] = {40, 40, 40};
    CHECK_MSG(pixels_of(&image, model) > 100, "the model's lines are not in their own colour");
    image_free(&image);
    free_snapshots(snaps, count);
    // one head: its lines are the only ones in head 0's colour
    snaps = fake_snapshots(count, 1, 1);
    phase_change_render(&image, snaps, count, 1, 1);
    long blue = pixels_of(&image, head0);
    CHECK(pixels_of(&image, model) > 100 && blue > 0);
    // nothing crosses the gap between the panels and the legend on the right:
    // the columns just left of the legend's first swatch are white in every row
    int right = 0, legend = -1; // the panels' right edge (their frames), then the first swatch past it
    for (int x = 0; x < image.width; x++)
        for (int row = 0; row < image.height; row++)
            if (!memcmp(image.rgb + 3 * ((long)row * image.width + x), FRAME, 3)) right = x;
    for (int x = image.width - 1; x > right; x--)
        for (int row = 0; row < image.height; row++)
            if (!memcmp(image.rgb + 3 * ((long)row * image.width + x), head0, 3)) legend = x;
    CHECK(legend > 0);
    int crossing = 0;
    for (int row = 0; legend > 0 && row < image.height; row++)
        for (int x = legend - 16; x < legend - 2; x++) crossing += !is_white(&image, x, row);
    CHECK_MSG(crossing == 0, "%d pixels between the panels and the legend (a title runs into it)", crossing);
    image_free(&image);
    free_snapshots(snaps, count);
}

// The explorer with snapshots, in Chromium: the slider in time order (the
// snapshots, then your text at its right end), the bar one line whatever
// the label, the heads' column titles in the text's ink (not a tile's colour).
static void test_explorer_slider_and_titles(void) {
    const char *chromium = find_chromium();
    if (!chromium || !file_exists(checkout_path("build-node/node_modules/puppeteer-core/package.json"))) {
        skip_test("chromium or puppeteer-core (build-node/) not installed");
        return;
    }
    const char *dir = make_temp_dir();
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "bin/train --data %s " TINY_ONE_THREAD " --iters 20 --eval-every 10 "
             "--heatmaps-every 10 --out %s/run", make_corpus(dir, "corpus.txt", 20000), dir);
    CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s/run/model.safetensors --text 'It was the best' "
             "--out %s/page --html", dir, dir);
    CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
    const char *capture = keep_path(path_in(dir, "driver.json"));
    snprintf(cmd, sizeof cmd, "node %s --explorer --page %s/page/index.html",
             checkout_path("tests/page_driver.mjs"), dir);
    CHECK(run_command(cmd, capture) == 0);
    char *out = read_text_file(capture);
    cJSON *json = out && strstr(out, "{\"") ? cJSON_Parse(strstr(out, "{\"")) : NULL;
    CHECK_MSG(json, "%s", out ? out : "");
    if (json) {
        const cJSON *labels = cJSON_GetObjectItem(json, "labels"), *heights = cJSON_GetObjectItem(json, "heights");
        int n = cJSON_GetArraySize(labels);
        CHECK_MSG(n == 3, "%d views (2 snapshots and your text)", n);
        const char *first = cJSON_GetStringValue(cJSON_GetArrayItem(labels, 0));
        const char *last = cJSON_GetStringValue(cJSON_GetArrayItem(labels, n - 1));
        CHECK_MSG(first && !strncmp(first, "step 10", 7), "the slider starts at \"%s\"", first ? first : "");
        CHECK_MSG(last && !strcmp(last, "your text"), "the slider ends at \"%s\"", last ? last : "");
        double h0 = cJSON_GetArrayItem(heights, 0)->valuedouble;
        for (int i = 1; i < cJSON_GetArraySize(heights); i++)
            CHECK_MSG(cJSON_GetArrayItem(heights, i)->valuedouble == h0, "the bar is %g px, then %g px",
                      h0, cJSON_GetArrayItem(heights, i)->valuedouble);
        const cJSON *ink = cJSON_GetObjectItem(json, "titleInk");
        int coloured = 0;
        for (int i = 0; i < cJSON_GetArraySize(ink); i++) {
            const cJSON *px = cJSON_GetArrayItem(ink, i);
            int r = cJSON_GetArrayItem(px, 1)->valueint, g = cJSON_GetArrayItem(px, 2)->valueint,
                b = cJSON_GetArrayItem(px, 3)->valueint;
            coloured += abs(r - g) > 24 || abs(g - b) > 24; // the text's ink is grey
        }
        CHECK_MSG(cJSON_GetArraySize(ink) > 20, "no column titles found");
        CHECK_MSG(coloured == 0, "%d pixels of the column titles in a tile's colour", coloured);
        cJSON_Delete(json);
    }
    free(out);
}

void suite_atlas(void) {
    run_test("atlas: the explorer's slider in time order, its bar one line, its column titles in ink "
             "(Chromium)", test_explorer_slider_and_titles);
    run_test("atlas: the timeline and the phase change: nothing clipped or overlapping, the model's lines "
             "in their own colour", test_timeline_layout);
    run_test("atlas: scores of hand-built attention (previous-token 1, uniform = baseline)",
             test_scores_known_answers);
    run_test("atlas: the induction probe and score", test_induction);
    run_test("atlas: eigenvalues of known spectra, under similarity", test_eigenvalues);
    run_test("atlas: copying score and K-composition against double references, built heads",
             test_copying_and_composition);
    run_test("atlas: QK/OV circuits and singular values against double precision", test_circuits);
    run_test("atlas: Unifont labels (Latin, Hangul) read back pixel by pixel, no overlap",
             test_unifont_labels);
    run_test("atlas: bad font, snapshot folder, characters outside the vocabulary", test_font_errors);
    run_test("atlas: bin/attn checks every input before writing; a bad --snapshots leaves OUT as it was",
             test_attn_checks_before_writing);
    run_test("atlas: without Unifont, the built-in font and one note", test_font_fallback_note);
    run_test("atlas: training snapshots, scores.csv, timeline, filmstrips", test_training_snapshots);
    run_test("atlas: the HTML explorer in headless Chromium", test_explorer_in_chromium);
}
