// explorer.c: writes the explorer page: its HTML, CSS and JavaScript
// (page/attn_explorer.*, page/attn_analyses.js) with the model's data as one
// JSON object in a script element.
#include "explorer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/base64.h"
#include "../base/files.h"
#include "../base/page_template.h"
#include "heatmap.h"

static void json_number(FILE *out, double v) {
    if (isnan(v) || isinf(v)) fputs("null", out);
    else fprintf(out, "%.6g", v);
}

// What the attribution of a block other than GPT-2's is of, for the page
// (interpret.h): its norm, its missing position part, its cap. Returns 0
// (note unset) for GPT-2's block, whose page says nothing more.
static int attribution_note(const Attribution *a, char *note, size_t len) {
    if (a->norm_bias && a->position_part && a->softcap == 0) return 0;
    snprintf(note, len, "%s%s", a->norm_bias ? "" : "ln_f is an RMSNorm: the parts are not "
             "centred and there is no ln_f bias. ", a->position_part ? "" : "RoPE: no position "
             "embedding part; positions rotate the queries and keys, inside the heads' parts. ");
    if (a->softcap > 0) {
        size_t used = strlen(note);
        snprintf(note + used, len - used, "Softcap %g: the difference and its parts are those of "
                 "the logits z before the cap; the model's logits are %g tanh(z/%g).", a->softcap,
                 a->softcap, a->softcap);
    }
    return 1;
}

static void json_code_points(FILE *out, const uint32_t *chars, int n) {
    fputc('[', out);
    for (int i = 0; i < n; i++) fprintf(out, "%s%u", i ? "," : "", (unsigned)chars[i]);
    fputc(']', out);
}

// ,"patching":{...}: the texts, the answers, the logit differences and
// each patch's recovery and its own logit difference.
static void patching_json(FILE *out, const PatchingPicture *picture) {
    const Patching *p = picture->patching;
    int T = p->T, heads = p->layers * p->heads;
    long cells = (long)p->layers * T;
    fprintf(out, ",\n\"patching\":{\"T\":%d,\"clean\":", T);
    json_code_points(out, picture->clean, T);
    fputs(",\"corrupt\":", out);
    json_code_points(out, picture->corrupt, T);
    fprintf(out, ",\"answers\":[%u,%u],\"cleanDiff\":%.9g,\"corruptDiff\":%.9g,\n\"heads\":[",
            (unsigned)picture->clean_answer, (unsigned)picture->corrupt_answer, p->clean_diff,
            p->corrupt_diff);
    for (int i = 0; i < heads; i++)
        fprintf(out, "%s%.9g", i ? "," : "", patching_recovery(p, p->head_diff[i]));
    fputs("],\"headDiffs\":[", out);
    for (int i = 0; i < heads; i++) fprintf(out, "%s%.9g", i ? "," : "", p->head_diff[i]);
    fputs("],\n\"stream\":[", out);
    for (long i = 0; i < cells; i++)
        fprintf(out, "%s%.9g", i ? "," : "", patching_recovery(p, p->stream_diff[i]));
    fputs("],\"streamDiffs\":[", out);
    for (long i = 0; i < cells; i++) fprintf(out, "%s%.9g", i ? "," : "", p->stream_diff[i]);
    fputs("]}", out);
}

// ,"analyses":{...}: the window, and each part asked for (else null).
static void analyses_json(FILE *out, int L, int NH, const ExplorerAnalyses *a) {
    int T = a->T;
    fprintf(out, ",\n\"analyses\":{\"T\":%d,\"chosen\":%d,\"window\":", T, a->chosen_position);
    json_code_points(out, a->chars, a->chars ? T + 1 : 0); // none with --patch alone
    fputs(",\n\"ablation\":", out);
    if (a->zero_loss) {
        fprintf(out, "{\"loss\":%.9g,\"positions\":%ld,\"windows\":%d,\"units\":[", a->loss,
                a->positions, a->windows);
        for (int l = 0; l < L; l++)
            for (int c = 0; c < NH + 2; c++) {
                int u = c < NH ? l * NH + c : L * NH + 2 * l + (c - NH);
                fprintf(out, "%s{\"layer\":%d,\"head\":", l + c ? "," : "", l);
                if (c < NH) fprintf(out, "%d", c);
                else fprintf(out, "\"%s\"", c == NH ? "attn" : "mlp");
                fprintf(out, ",\"zero\":%.9g,\"mean\":%.9g", a->zero_loss[u], a->mean_loss[u]);
                if (a->zero_frozen_loss)
                    fprintf(out, ",\"zeroFrozen\":%.9g,\"meanFrozen\":%.9g",
                            a->zero_frozen_loss[u], a->mean_frozen_loss[u]);
                fputc('}', out);
            }
        fputs("]}", out);
    } else {
        fputs("null", out);
    }
    fputs(",\n\"lens\":", out);
    if (a->lens) {
        int n = (L + 1) * T;
        fputs("{\"top\":[", out);
        for (int i = 0; i < n; i++) fprintf(out, "%s%u", i ? "," : "", (unsigned)a->code_points[a->lens[i].top]);
        fputs("],\"topProb\":[", out);
        for (int i = 0; i < n; i++) fprintf(out, "%s%.6g", i ? "," : "", a->lens[i].top_prob);
        fputs("],\"nextProb\":[", out);
        for (int i = 0; i < n; i++) fprintf(out, "%s%.6g", i ? "," : "", a->lens[i].target_prob);
        fputs("]}", out);
    } else {
        fputs("null", out);
    }
    fputs(",\n\"attribution\":", out);
    if (a->attributions) {
        fputc('[', out);
        for (int t = 0; t < T; t++) {
            const Attribution *p = &a->attributions[t];
            fprintf(out, "%s\n{\"next\":%u,\"other\":%u,\"diff\":%.9g,\"total\":%.9g,\"parts\":[",
                    t ? "," : "", (unsigned)a->code_points[p->target],
                    (unsigned)a->code_points[p->other], p->logit_diff, attribution_total(p));
            fprintf(out, "[\"token embedding\",%.9g]", p->token_embedding);
            if (p->position_part) // RoPE: no such part (interpret.h)
                fprintf(out, ",[\"position embedding\",%.9g]", p->position_embedding);
            for (int l = 0; l < L; l++) {
                for (int h = 0; h < NH; h++)
                    fprintf(out, ",[\"layer %d head %d\",%.9g]", l, h, p->heads[l * NH + h]);
                fprintf(out, ",[\"layer %d mlp\",%.9g]", l, p->mlps[l]);
            }
            fprintf(out, ",[\"rest\",%.9g]]}", p->rest);
        }
        fputc(']', out);
        char note[600];
        if (attribution_note(&a->attributions[a->chosen_position], note, sizeof note)) {
            fputs(",\n\"attributionNote\":\"", out);
            fputs(note, out); // plain ASCII from this program, no quote or backslash
            fputc('"', out);
        }
    } else {
        fputs("null", out);
    }
    if (a->patching) patching_json(out, a->patching);
    fputc('}', out);
}

// What the page shows, in the page's own names.
typedef struct {
    int L, NH;
    const ExplorerView *views;
    int num_views;
    const ExplorerAnalyses *analyses;
} PageData;

// The page's data: one JSON object.
static void write_data(FILE *out, const void *context) {
    const PageData *d = context;
    int L = d->L, NH = d->NH, num_views = d->num_views;
    const ExplorerView *views = d->views;
    const ExplorerAnalyses *analyses = d->analyses;
    fprintf(out, "{\"layers\":%d,\"heads\":%d,\"colormap\":\"", L, NH);
    for (int k = 0; k < HEATMAP_COLORS; k++) {
        uint8_t rgb[3];
        colormap_rgb(COLORMAP_VIRIDIS, k, rgb);
        fprintf(out, "%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
    }
    fputs("\",\"scoreNames\":[", out);
    for (int k = 0; k < NUM_SCORES; k++) fprintf(out, "%s\"%s\"", k ? "," : "", score_name(k));
    fputs("],\"scoreTags\":[", out);
    for (int k = 0; k < NUM_SCORES; k++) fprintf(out, "%s\"%s\"", k ? "," : "", score_tag(k));
    fputs("],\"tags\":[", out);
    for (int v = 0; v < num_views; v++) {
        fputs(v ? ",[" : "[", out);
        for (int h = 0; h < L * NH; h++) {
            int type = views[v].scores ? head_dominant_type(&views[v].scores[h]) : -1;
            fprintf(out, "%s\"%s\"", h ? "," : "", type >= 0 ? score_tag(type) : "");
        }
        fputs("]", out);
    }
    fputs("],\"views\":[", out);
    for (int v = 0; v < num_views; v++) {
        const ExplorerView *view = &views[v];
        fprintf(out, "%s\n{\"label\":\"", v ? "," : "");
        for (const char *c = view->label; *c; c++) // labels are plain ASCII from this program
            if (*c != '"' && *c != '\\' && *c != '<') fputc(*c, out);
        fprintf(out, "\",\"step\":%ld,\"loss\":", view->step);
        json_number(out, view->loss);
        fputs(",\"icl\":", out);
        json_number(out, view->icl);
        fputs(",\"sink\":", out);
        json_number(out, view->sink_rate);
        fprintf(out, ",\"T\":%d,\"chars\":[", view->T);
        for (int i = 0; i < view->T; i++) fprintf(out, "%s%u", i ? "," : "", (unsigned)view->chars[i]);
        fputs("],\"scores\":", out);
        if (!view->scores) {
            fputs("null", out);
        } else {
            fputs("[", out);
            for (int h = 0; h < L * NH; h++) {
                fputs(h ? ",[" : "[", out);
                for (int k = 0; k < NUM_SCORES; k++) {
                    fputs(k ? ",[" : "[", out);
                    json_number(out, view->scores[h].value[k]);
                    fputs(",", out);
                    json_number(out, view->scores[h].uniform[k]);
                    fputs("]", out);
                }
                fputs("]", out);
            }
            fputs("]", out);
        }
        fputs(",\"attn\":\"", out);
        // little-endian floats (x86, ARM)
        base64_write(out, view->attn, sizeof(float) * L * NH * view->T * view->T);
        fputs("\"}", out);
    }
    fputs("]", out);
    if (analyses) analyses_json(out, L, NH, analyses);
    fputs("}", out);
}

// page/embed.sh's arrays of the page's files (build/page/attn_assets.c).
extern const unsigned char attn_explorer_html[], attn_explorer_css[], attn_explorer_js[],
    attn_analyses_js[], attn_attribution_note_js[];

int explorer_write(const char *path, int L, int NH, const ExplorerView *views, int num_views,
                   const ExplorerAnalyses *analyses, char *err, size_t err_len) {
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) return 0;
    char note[600];
    int has_note = analyses && analyses->attributions &&
                   attribution_note(&analyses->attributions[analyses->chosen_position], note,
                                    sizeof note);
    // the analyses' views only when bin/attn had them, so that a page
    // without them is as it always was
    TemplateSlot slots[] = {
        {"STYLE", (const char *)attn_explorer_css, NULL},
        {"DATA", NULL, write_data},
        {"SCRIPT", (const char *)attn_explorer_js, NULL},
        {"ANALYSES", analyses ? (const char *)attn_analyses_js : "", NULL},
        {"NOTE", has_note ? (const char *)attn_attribution_note_js : "", NULL},
    };
    PageData data = {L, NH, views, num_views, analyses};
    template_write(af.file, (const char *)attn_explorer_html, slots, sizeof slots / sizeof slots[0],
                   &data);
    if (ferror(af.file)) atomic_file_write_failed(&af);
    return atomic_file_commit(&af, err, err_len);
}
