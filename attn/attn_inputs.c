// attn_inputs.c: the texts bin/attn reads, checked against the model's
// vocabulary and context before anything is written.
#include "attn_inputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/options.h"
#include "../base/util.h"

// Every distinct character of text[0..len) (valid UTF-8) that the
// vocabulary lacks, in order of first appearance, into msg: "'€' (U+20AC)
// at position 1, 2 times; '™' (U+2122) at position 4" (the first 12, then
// how many more).
#define UNKNOWN_LISTED 12
static void list_unknown(const Vocab *vocab, const char *text, size_t len, char *msg,
                         size_t msg_len) {
    uint32_t seen[UNKNOWN_LISTED];
    int first_at[UNKNOWN_LISTED], times[UNKNOWN_LISTED], distinct = 0, more = 0;
    size_t pos = 0, used = 0;
    uint32_t cp;
    for (int position = 0; utf8_decode((const unsigned char *)text, len, &pos, &cp); position++) {
        if (vocab_id(vocab, cp) >= 0) continue;
        int k = 0;
        while (k < distinct && seen[k] != cp) k++;
        if (k < distinct) times[k]++;
        else if (distinct < UNKNOWN_LISTED)
            seen[distinct] = cp, first_at[distinct] = position, times[distinct++] = 1;
        else more++; // counts occurrences past the listed ones' characters
    }
    msg[0] = 0;
    for (int k = 0; k < distinct && used < msg_len; k++) {
        char shown[5] = {0};
        utf8_encode(seen[k], shown);
        // a control character would break the one-line message
        if (seen[k] < 0x20 || seen[k] == 0x7f) snprintf(shown, sizeof shown, "?");
        char count[32] = "";
        if (times[k] > 1) snprintf(count, sizeof count, ", %d times", times[k]);
        used += snprintf(msg + used, msg_len - used, "%s'%s' (U+%04X) at position %d%s",
                         k ? "; " : "", shown, seen[k], first_at[k], count);
    }
    if (more && used < msg_len)
        snprintf(msg + used, msg_len - used, "; and %d more occurrence%s of other characters", more,
                 more == 1 ? "" : "s");
}

// What decode_text does with a character the vocabulary lacks.
typedef enum {
    UNKNOWN_REFUSED,   // an error that names --skip-unknown
    UNKNOWN_SKIPPED,   // dropped, with a warning (--skip-unknown)
    UNKNOWN_NEVER_OK,  // an error: --patch's texts, whose positions must stay
} UnknownChars;

// The text's code points: every one in the vocabulary, or when skipped
// those that are (the others named in a warning); else a one-line error
// naming every unknown character. A NUL byte is refused as bin/train
// refuses it.
static uint32_t *decode_text(const char *source, const char *text, size_t len,
                             const Vocab *vocab, UnknownChars unknown, int *num_chars) {
    EncodedText encoded;
    char err[4096];
    const char *nul = memchr(text, 0, len);
    if (nul)
        die("%s: NUL byte at offset %zu (a binary file, not text?)", source, (size_t)(nul - text));
    if (!vocab_encode_text(vocab, source, text, len, &encoded, err, sizeof err)) die("%s", err);
    if (encoded.unknown) {
        char listed[3072];
        list_unknown(vocab, text, len, listed, sizeof listed);
        if (unknown == UNKNOWN_NEVER_OK)
            usage_error("%s: %d character%s not in the model's vocabulary: %s", source,
                        encoded.unknown, encoded.unknown == 1 ? " is" : "s are", listed);
        if (unknown == UNKNOWN_REFUSED)
            die("%s: %d character%s not in the model's vocabulary: %s; --skip-unknown drops them",
                source, encoded.unknown, encoded.unknown == 1 ? " is" : "s are", listed);
        fprintf(stderr, "warning: %s: %d character%s not in the model's vocabulary, dropped: %s\n",
                source, encoded.unknown, encoded.unknown == 1 ? "" : "s", listed);
    }
    if (encoded.num_ids == 0)
        die("%s: the text is empty%s", source, encoded.unknown ? " once its unknown characters are dropped" : "");
    free(encoded.ids);
    *num_chars = encoded.num_ids;
    return encoded.chars;
}

static UnknownChars unknown_chars(const AttnOptions *o) {
    return o->skip_unknown ? UNKNOWN_SKIPPED : UNKNOWN_REFUSED;
}

// --text or --text-file as code points, cut to the model's context (which
// print_notes says); its pictures at --cell must fit.
AttnText read_text(const AttnOptions *o, const GPT *model, const Vocab *vocab) {
    char err[2048];
    int L = model->config.layers, NH = model->config.heads, context = model->config.context;
    size_t len;
    char *file_text = NULL;
    const char *text = o->text, *source = "--text";
    if (o->text_file) {
        file_text = read_whole_file(o->text_file, &len);
        text = file_text;
        source = o->text_file;
    } else {
        len = strlen(o->text);
    }
    AttnText t;
    t.chars = decode_text(source, text, len, vocab, unknown_chars(o), &t.T);
    free(file_text);
    t.num_chars = t.T;
    t.window = t.chars;
    if (t.T > context) {
        t.window = t.chars + (t.T - context);
        t.T = context;
    }
    if (!heatmaps_check_size(L, NH, t.T, o->cell, err, sizeof err)) usage_error("--cell: %s", err);
    return t;
}

// ---- what the analyses read: the prediction window and the ablation's windows

int analyses_asked(const AttnOptions *o) {
    return o->ablate || o->lens || o->attribute_position >= 0;
}

// The flag that asked for a prediction window (for its errors).
static const char *analysis_flag(const AttnOptions *o) {
    return o->ablate ? "--ablate" : o->lens ? "--lens" : "--attribute-position";
}

// Checked: at least 2 characters, and --attribute-position inside the window.
PredictionWindow prediction_window(const AttnOptions *o, const GPT *model,
                                   const Vocab *vocab, const AttnText *text) {
    PredictionWindow w = {0};
    if (!analyses_asked(o)) return w;
    if (text->num_chars < 2)
        die("%s: the text has 1 character, need at least 2 (each position predicts the next)",
            analysis_flag(o));
    w.T = text->num_chars - 1 < model->config.context ? text->num_chars - 1 : model->config.context;
    if (o->attribute_position >= w.T)
        die("--attribute-position %d is out of range: the text's first %d positions predict the "
            "character after them (0..%d)", o->attribute_position, w.T, w.T - 1);
    w.chars = text->chars;
    w.tokens = xmalloc(sizeof(int) * w.T);
    w.targets = xmalloc(sizeof(int) * w.T);
    for (int t = 0; t < w.T; t++) {
        w.tokens[t] = vocab_id(vocab, text->chars[t]);
        w.targets[t] = vocab_id(vocab, text->chars[t + 1]);
    }
    return w;
}

// --ablate-text-file's windows: W = min(--ablate-windows, (n-1)/T) windows
// of T + 1 characters (T = min(context, n - 1)), the first at the start,
// the last at the end, the others spread evenly between; without the flag,
// the prediction window alone.
AblationWindows ablation_windows(const AttnOptions *o, const GPT *model,
                                 const Vocab *vocab, const PredictionWindow *window) {
    AblationWindows set = {0};
    if (!o->ablate) return set;
    if (!o->ablate_text_file) {
        set.W = 1;
        set.T = window->T;
        set.tokens = xmalloc(sizeof(int) * set.T);
        set.targets = xmalloc(sizeof(int) * set.T);
        memcpy(set.tokens, window->tokens, sizeof(int) * set.T);
        memcpy(set.targets, window->targets, sizeof(int) * set.T);
        return set;
    }
    size_t len;
    char *file_text = read_whole_file(o->ablate_text_file, &len);
    int n;
    uint32_t *chars = decode_text(o->ablate_text_file, file_text, len, vocab, unknown_chars(o), &n);
    free(file_text);
    if (n < 2)
        die("--ablate-text-file %s: 1 character, need at least 2 (each position predicts the next)",
            o->ablate_text_file);
    set.T = n - 1 < model->config.context ? n - 1 : model->config.context;
    int most = (n - 1) / set.T;
    set.W = o->ablate_windows < most ? o->ablate_windows : most;
    set.tokens = xmalloc(sizeof(int) * set.W * set.T);
    set.targets = xmalloc(sizeof(int) * set.W * set.T);
    for (int w = 0; w < set.W; w++) {
        long start = set.W > 1 ? (long)w * (n - 1 - set.T) / (set.W - 1) : 0;
        for (int t = 0; t < set.T; t++) {
            set.tokens[(long)w * set.T + t] = vocab_id(vocab, chars[start + t]);
            set.targets[(long)w * set.T + t] = vocab_id(vocab, chars[start + t + 1]);
        }
    }
    free(chars);
    return set;
}

// ---- activation patching's two texts

// The default pair (patching.h: patching_default_pair): a string of at most
// PATCH_DEFAULT_REPEAT distinct characters repeated, drawn from the
// vocabulary's visible characters by a fixed seed, so that the same model
// always gets the same pair.
#define PATCH_DEFAULT_REPEAT 10
#define PATCH_DEFAULT_SEED 41

// A character for a one-line message: itself, or U+XXXX for a control character.
const char *char_shown(uint32_t cp, char shown[16]) {
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
        snprintf(shown, 16, "U+%04X", (unsigned)cp);
    } else {
        int n = utf8_encode(cp, shown);
        shown[n] = 0;
    }
    return shown;
}

static char *utf8_text(const uint32_t *chars, int n) {
    char *text = xmalloc((size_t)4 * n + 1), *at = text;
    for (int i = 0; i < n; i++) at += utf8_encode(chars[i], at);
    *at = 0;
    return text;
}

static PatchPair default_patch_pair(const GPT *model, const Vocab *vocab) {
    int V = vocab->size, count = 0, *candidates = xmalloc(sizeof(int) * V);
    for (int v = 0; v < V; v++) {
        uint32_t cp = vocab->code_points[v];
        if (cp > 0x20 && cp != 0x7f && !(cp >= 0x80 && cp <= 0xa0)) candidates[count++] = v;
    }
    int n = PATCH_DEFAULT_REPEAT, context = model->config.context;
    if (n > (context + 1) / 2) n = (context + 1) / 2;
    if (n > count - 1) n = count - 1;
    if (n < 2)
        usage_error("--patch: the built-in pair needs a context of at least 3 and 3 visible "
                    "characters in the vocabulary (this model: context %d, %d); give --clean and "
                    "--corrupt", context, count);
    PatchPair pair = {.T = 2 * n - 1};
    pair.clean = xmalloc(sizeof(int) * pair.T);
    pair.corrupt = xmalloc(sizeof(int) * pair.T);
    patching_default_pair(candidates, count, n, PATCH_DEFAULT_SEED, pair.clean, pair.corrupt,
                          &pair.clean_answer, &pair.corrupt_answer);
    free(candidates);
    pair.clean_chars = xmalloc(sizeof(uint32_t) * pair.T);
    pair.corrupt_chars = xmalloc(sizeof(uint32_t) * pair.T);
    for (int t = 0; t < pair.T; t++) {
        pair.clean_chars[t] = vocab->code_points[pair.clean[t]];
        pair.corrupt_chars[t] = vocab->code_points[pair.corrupt[t]];
    }
    return pair;
}

// --clean and --corrupt, checked: each in the vocabulary, of equal length,
// at most the context, not the same.
static PatchPair given_patch_pair(const AttnOptions *o, const GPT *model, const Vocab *vocab) {
    PatchPair pair = {.clean_answer = -1, .corrupt_answer = -1};
    int context = model->config.context, corrupt_T;
    pair.clean_chars = decode_text("--clean", o->clean, strlen(o->clean), vocab, UNKNOWN_NEVER_OK,
                                   &pair.T);
    pair.corrupt_chars = decode_text("--corrupt", o->corrupt, strlen(o->corrupt), vocab,
                                     UNKNOWN_NEVER_OK, &corrupt_T);
    if (corrupt_T != pair.T)
        usage_error("--patch: --clean has %d characters and --corrupt %d: the texts must be of "
                    "equal length, compared position by position", pair.T, corrupt_T);
    if (pair.T > context)
        usage_error("--patch: the texts have %d characters, more than the model's context of %d",
                    pair.T, context);
    int differ = 0;
    for (int t = 0; t < pair.T; t++) differ += pair.clean_chars[t] != pair.corrupt_chars[t];
    if (!differ)
        usage_error("--patch: --clean and --corrupt are the same text: nothing to recover");
    pair.clean = xmalloc(sizeof(int) * pair.T);
    pair.corrupt = xmalloc(sizeof(int) * pair.T);
    for (int t = 0; t < pair.T; t++) {
        pair.clean[t] = vocab_id(vocab, pair.clean_chars[t]);
        pair.corrupt[t] = vocab_id(vocab, pair.corrupt_chars[t]);
    }
    return pair;
}

// The pair --patch patches (all zero without --patch).
PatchPair patch_pair(const AttnOptions *o, const GPT *model, const Vocab *vocab) {
    PatchPair pair = {0};
    if (!o->patch) return pair;
    pair = o->clean ? given_patch_pair(o, model, vocab) : default_patch_pair(model, vocab);
    pair.clean_text = utf8_text(pair.clean_chars, pair.T);
    return pair;
}

// Runs the patching, before anything is written: a pair that cannot be
// measured (both texts predicting the same character, or logit
// differences too close) is refused like a bad flag.
void run_patching(GPT *model, const Vocab *vocab, PatchPair *pair) {
    gpt_alloc_inference(model, 1, pair->T);
    if (pair->clean_answer < 0) {
        pair->clean_answer = predicted_next(model, pair->clean, pair->T);
        pair->corrupt_answer = predicted_next(model, pair->corrupt, pair->T);
        char shown[16];
        if (pair->clean_answer == pair->corrupt_answer)
            usage_error("--patch: the model predicts '%s' next after both texts: nothing to "
                        "recover; choose texts whose predictions differ",
                        char_shown(vocab->code_points[pair->clean_answer], shown));
    }
    char err[600];
    if (!activation_patching(model, pair->clean, pair->corrupt, pair->T, pair->clean_answer,
                             pair->corrupt_answer, &pair->found, err, sizeof err))
        usage_error("--patch: %s", err);
}

void free_patch_pair(PatchPair *pair) {
    free(pair->clean), free(pair->corrupt), free(pair->clean_chars), free(pair->corrupt_chars);
    free(pair->clean_text);
    patching_free(&pair->found);
    memset(pair, 0, sizeof *pair);
}
