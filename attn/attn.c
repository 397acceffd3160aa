// attn.c: bin/attn, what every attention head attends to. Runs a checkpoint
// over a text and writes one heatmap per head (rows = query positions,
// columns = key positions), an overview of all heads, and optionally the raw
// probabilities. The pictures' layout is described in heatmap.h. Then the
// atlas: head scores (scores.h) as a table, OUT/scores.csv and one picture
// per score; the QK and OV circuits of every head in OUT/circuits/
// (circuits.h) and their positions' path (position_circuit.h: learned
// positions' table, or RoPE's scores by distance, as the model's config
// says); and with --html the explorer page OUT/index.html
// (explorer.h), with the training snapshots when there are any (atlas.h).
// The analyses, each asked for by its flag: ablation (with the later
// patterns frozen too), the logit lens, attribution (interpret.h) and
// activation patching (patching.h).
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "../base/options.h"
#include "../base/util.h"
#include "../infer/checkpoint.h"
#include "../infer/threads.h"
#include "attn_folder.h"
#include "attn_outputs.h"

// The label font, then the checkpoint's model and vocabulary; --layer and
// --head must name one of its layers and heads.
static void load_model(const AttnOptions *o, GPT *model, Vocab *vocab) {
    char err[2048];
    if (!label_font_select(o->font, err, sizeof err)) die("--font: %s", err);
    if (!file_exists(o->ckpt))
        die("%s: no such file: train a model first (./bin/train saves out/model.safetensors), or "
            "give --ckpt FILE", o->ckpt);
    if (!gpt_load(o->ckpt, model, vocab, err, sizeof err)) die("%s", err);
    int L = model->config.layers, NH = model->config.heads;
    if (o->layer >= L)
        usage_error("--layer %d is out of range: the model has %d layer%s (0..%d, or -1 for all)",
                    o->layer, L, L == 1 ? "" : "s", L - 1);
    if (o->head >= NH)
        usage_error("--head %d is out of range: the model has %d head%s (0..%d, or -1 for all)",
                    o->head, NH, NH == 1 ? "" : "s", NH - 1);
}

// What the user should know once every input has passed (an error is the
// only line a bad input prints): the text was cut to the context, the
// labels use the built-in font.
static void print_notes(const AttnText *text) {
    if (text->T < text->num_chars)
        fprintf(stderr, "note: the text has %d characters, more than the model's context of %d: "
                "using the last %d\n", text->num_chars, text->T, text->T);
    const char *fallback = label_font_fallback();
    if (fallback)
        fprintf(stderr, "note: %s: labels use the built-in ASCII font, other characters show as "
                "boxes\n", fallback);
}

// Every head's scores (L*NH of them, the caller frees them); leaves the
// text's attention in the model.
static HeadScores *score_heads(GPT *model, const Vocab *vocab, const AttnText *text) {
    int L = model->config.layers, NH = model->config.heads, context = model->config.context;
    int T = text->T;
    int *tokens = xmalloc((size_t)T * sizeof(int));
    for (int i = 0; i < T; i++) tokens[i] = vocab_id(vocab, text->window[i]);
    // room for the induction probe too (scores.h)
    gpt_alloc_inference(model, 1, T > context ? T : context);
    HeadScores *scores = xmalloc(sizeof(HeadScores) * L * NH);
    model_head_scores(model, tokens, T, scores);
    free(tokens);
    return scores;
}

int main(int argc, char **argv) {
    // Every input is checked before anything is written: the flags, the
    // font, the checkpoint, the text (in the vocabulary, its pictures not
    // too large), that --out can be a folder, and the snapshots (last: the
    // default folder's unreadable ones are left out with a note, not an
    // error); then the notes.
    AttnOptions o = parse_options(argc, argv);
    HeatmapOptions heatmap = heatmap_options(&o);
    GPT model;
    Vocab vocab;
    load_model(&o, &model, &vocab);
    gpt_set_precision(&model, o.products, o.bf16);
    forward_threads(&model, o.threads);
    PatchPair pair = patch_pair(&o, &model, &vocab);
    if (o.patch && !o.text && !o.text_file) o.text = pair.clean_text;
    AttnText text = read_text(&o, &model, &vocab);
    PredictionWindow window = prediction_window(&o, &model, &vocab, &text);
    AblationWindows ablation_set = ablation_windows(&o, &model, &vocab, &window);
    struct stat out_stat;
    if (stat(o.out, &out_stat) == 0 && !S_ISDIR(out_stat.st_mode))
        die("--out %s: not a folder", o.out);
    ExplorerSnapshots snapshots = {0};
    if (o.html) snapshots = read_explorer_snapshots(&o, &model);
    OutFolder folder = {0};
    check_out_folder(&o, &folder);
    if (o.patch) run_patching(&model, &vocab, &pair);
    print_notes(&text);

    // from here on what is written is recorded, also when the run fails
    record_out_folder_on_failure(&folder);
    HeadScores *scores = score_heads(&model, &vocab, &text);
    write_pictures(&o, &model, &vocab, &text, &heatmap, scores);
    record_out_folder_or_die(&folder, 0);
    float *attention = o.html ? text_attention(&model, text.T) : NULL;
    Findings found = {0};
    if (o.ablate) {
        write_ablation(&o, &model, &window, &ablation_set, &found);
        record_out_folder_or_die(&folder, 0);
    }
    if (o.lens) {
        found.lens = write_lens(&o, &model, &vocab, &window);
        record_out_folder_or_die(&folder, 0);
    }
    if (o.attribute_position >= 0)
        found.attributions = write_attribution(&o, &model, &vocab, &window);
    PatchingPicture patching = {0};
    if (o.patch) {
        record_out_folder_or_die(&folder, 0);
        patching = (PatchingPicture){&pair.found, pair.clean_chars, pair.corrupt_chars,
                                     vocab.code_points[pair.clean_answer],
                                     vocab.code_points[pair.corrupt_answer]};
        write_patching(&o, &pair, &patching);
    }
    ExplorerAnalyses analyses = {.T = window.T,
                                 .chars = window.chars,
                                 .code_points = vocab.code_points,
                                 .zero_loss = found.zero_loss,
                                 .mean_loss = found.mean_loss,
                                 .loss = found.loss,
                                 .positions = found.positions,
                                 .windows = found.windows,
                                 .lens = found.lens,
                                 .attributions = found.attributions,
                                 .chosen_position = o.attribute_position,
                                 .zero_frozen_loss = found.zero_frozen_loss,
                                 .mean_frozen_loss = found.mean_frozen_loss,
                                 .patching = o.patch ? &patching : NULL};
    if (o.html)
        write_explorer(&o, &model, text.window, text.T, attention, scores, &snapshots,
                       analyses_asked(&o) || o.patch ? &analyses : NULL);
    record_out_folder_or_die(&folder, 1);
    set_fatal_hook(NULL);

    file_list_free(&folder.last), file_list_free(&folder.before);
    free_findings(&found, window.T);
    free_patch_pair(&pair);
    free(attention);
    free(ablation_set.tokens), free(ablation_set.targets);
    free(window.tokens), free(window.targets);
    free_explorer_snapshots(&snapshots);
    free(scores);
    free(text.chars);
    gpt_free(&model);
    vocab_free(&vocab);
    return 0;
}

