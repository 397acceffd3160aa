// transformer.c: the forward, written once (gpt.h: Forward), over a batch
// (gpt_forward) or the KV cache's new positions, and the batch's backward.
#include "gpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "../kernels/matmul.h"
#include "layouts.h"
#include "ops.h"
#include "packed_weights.h"
#include "../kernels/parallel.h"
#include "../base/util.h"

// ---- the forward, written once (gpt.h: Forward)

// A block's three dropout masks (nanoGPT's places inside a block): the
// attention probabilities, and the outputs of W_O and of the MLP projection.
typedef struct {
    DropoutMask att_probs, att_proj, mlp_proj;
} BlockMasks;

static BlockMasks block_masks(const Dropout *drop, int l, int NH, int T, int C) {
    long row_tc = (long)T * C;
    return (BlockMasks){dropout_mask(drop, DROPOUT_ATT_PROBS, l, (long)NH * T * T),
                        dropout_mask(drop, DROPOUT_ATT_PROJ, l, row_tc),
                        dropout_mask(drop, DROPOUT_MLP_PROJ, l, row_tc)};
}

// The block's norm: out (N,C) = LayerNorm (mean, rstd saved) or RMSNorm
// (rstd saved; mean and bias unused) of inp, as the config says.
static void norm_forward(const GPTConfig *cfg, float *out, float *mean, float *rstd,
                         const float *inp, const float *weight, const float *bias, int N) {
    if (cfg->norm == NORM_RMSNORM)
        rmsnorm_forward(out, rstd, inp, weight, N, cfg->dim);
    else
        layernorm_forward(out, mean, rstd, inp, weight, bias, N, cfg->dim);
}

static void norm_backward(const GPTConfig *cfg, float *d_inp, float *d_weight, float *d_bias,
                          const float *d_out, const float *inp, const float *weight,
                          const float *mean, const float *rstd, int N) {
    if (cfg->norm == NORM_RMSNORM)
        rmsnorm_backward(d_inp, d_weight, d_out, inp, weight, rstd, N, cfg->dim);
    else
        layernorm_backward(d_inp, d_weight, d_bias, d_out, inp, weight, mean, rstd, N, cfg->dim);
}

// The MLP's activation: act (N,H) from fc (N,GATES*H).
static void mlp_activation_forward(const GPTConfig *cfg, float *act, const float *fc, int N) {
    int H = gpt_mlp_hidden(cfg);
    switch (cfg->mlp) {
    case MLP_GELU: gelu_forward(act, fc, (long)N * H); break;
    case MLP_RELU2: relu2_forward(act, fc, (long)N * H); break;
    case MLP_SWIGLU: swiglu_forward(act, fc, N, H); break;
    }
}

static void mlp_activation_backward(const GPTConfig *cfg, float *d_fc, const float *fc,
                                    const float *d_act, int N) {
    int H = gpt_mlp_hidden(cfg);
    switch (cfg->mlp) {
    case MLP_GELU: gelu_backward(d_fc, fc, d_act, (long)N * H); break;
    case MLP_RELU2: relu2_backward(d_fc, fc, d_act, (long)N * H); break;
    case MLP_SWIGLU: swiglu_backward(d_fc, fc, d_act, N, H); break;
    }
}

// What the attention reads from the projections' outputs: with qk_norm,
// q = RMSNorm(q_raw) and k = RMSNorm(k_raw) per head (gain hs, shared by
// the heads); with RoPE, q and k then rotated by their rows' positions.
static void queries_keys_forward(const GPT *model, const LayerParams *p, const BlockBuffers *b,
                                 int rows) {
    const GPTConfig *cfg = &model->config;
    int C = cfg->dim, NH = cfg->heads, hs = C / NH;
    const QueryRows *q = &b->queries;
    if (cfg->qk_norm) {
        rmsnorm_forward(b->q, b->q_rstd, b->q_raw, p->q_norm_w, q->rows * NH, hs);
        rmsnorm_forward(b->k, b->k_rstd, b->k_raw, p->k_norm_w, rows * NH, hs);
    }
    if (cfg->pos == POS_ROPE) {
        rope_forward(b->q, model->rope_table, q->positions, q->rows, C, NH);
        rope_forward(b->k, model->rope_table, b->positions, rows, C, NH);
    }
}

// With RoPE no position is added here (wpe has no rows).
static float *position_embedding(const GPT *model, const ParameterTensors *tensors) {
    return model->config.pos == POS_LEARNED ? tensors->wpe : NULL;
}

// The stream's start, embedded (R,C): each row wte[token] + wpe[position];
// with the smear, smeared from those sums (in sums), a group's first row
// at pos > 0 from the window's previous position's (in before, at the
// group's row) as gpt_forward smears a whole window.
static void embed_rows(const Forward *f, float *x, float *sums, float *before) {
    const GPT *model = f->model;
    const GPTConfig *cfg = &model->config;
    const ParameterTensors *p = &model->params;
    const float *wpe = position_embedding(model, p);
    int B = f->samples, C = cfg->dim, G = gpt_smear_width(cfg);
    FOR_EACH(item, (long)f->group_count * B, (long)f->rows * C, {
        const RowGroup *g = &f->groups[item / B];
        int b = (int)(item % B), pos = g->pos;
        long row = (long)g->first_row + (long)b * g->n;
        const int *tokens = g->tokens + b * g->token_stride + pos;
        float *sum = cfg->smear ? sums + row * C : x + row * C;
        embedding_forward(sum, tokens, p->wte, wpe ? wpe + (long)pos * C : NULL, 1, g->n, C);
        if (!cfg->smear) continue;
        float *previous = pos > 0 ? before + row * C : NULL;
        if (previous)
            embedding_forward(previous, tokens - 1, p->wte, wpe ? wpe + (long)(pos - 1) * C : NULL,
                              1, 1, C);
        for (int t = 0; t < g->n; t++)
            smear_step(x + (row + t) * C, sum + (long)t * C, t ? sum + (long)(t - 1) * C : previous,
                       p->smear_gate, p->smear_lambda, C, G);
    });
}

// out (rows,OC) = inp (rows,IC) . W^T + b: W is tensor `weight` (PARAM_w_o,
// ...), layer l's slice when stacked, (OC,IC) its shape, b its bias (the
// table's bias column); through the packed weights when the Forward has them.
static void forward_linear(const Forward *f, int l, int weight, float *out, const float *inp,
                           int rows) {
    const GPT *model = f->model;
    int ic, oc;
    weight_widths(&model->config, weight, &ic, &oc);
    if (f->packed)
        packed_linear(f->packed, model, weight, l, out, inp, ic, rows);
    else
        linear_forward(f->products, out, inp, param_slice(model, &model->params, weight, l),
                       param_bias(model, &model->params, weight, l), rows, ic, oc);
}

// Whether block l reads its q, k and v from the packed weights' layer-0
// table (packed_weights.h) rather than running its norm and products.
static int layer0_by_table(const Forward *f, int l) {
    return l == 0 && f->packed && f->packed->layer0_qkv;
}

// The layer-0 table's row for the forward's row r: its token's, at its
// position (its group's pos + i for row first_row + s*n + i).
static long layer0_table_row(const Forward *f, int r) {
    int gi = f->group_count - 1;
    while (gi > 0 && r < f->groups[gi].first_row) gi--;
    const RowGroup *g = &f->groups[gi];
    int s = (r - g->first_row) / g->n, i = (r - g->first_row) % g->n;
    int token = g->tokens[s * g->token_stride + g->pos + i], P = f->packed->layer0_positions;
    return (long)token * P + (P > 1 ? g->pos + i : 0);
}

// q (queries,C), k, v (R,C) of layer 0, each row's copied from the table.
static void layer0_qkv_from_table(const Forward *f, const BlockBuffers *b) {
    const PackedWeights *w = f->packed;
    const QueryRows *q = &b->queries;
    long C = f->model->config.dim, third = (long)f->model->config.vocab_size * w->layer0_positions * C;
    const float *q_table = w->layer0_qkv, *k_table = q_table + third, *v_table = k_table + third;
    size_t row_bytes = (size_t)C * sizeof(float);
    FOR_EACH(r, f->rows, (long)f->rows * 2 * C, {
        long at = layer0_table_row(f, (int)r) * C;
        memcpy(b->k_raw + r * C, k_table + at, row_bytes);
        memcpy(b->v + r * C, v_table + at, row_bytes);
    });
    for (int i = 0; i < q->rows; i++)
        memcpy(b->q_raw + (long)i * C, q_table + layer0_table_row(f, q->first + i * q->step) * C,
               row_bytes);
}

// q (queries,C), k, v (R,C) = ln . W_{Q,K,V}^T + b_{Q,K,V}, layer l's (layer
// 0's from the table, where the packed weights have one); with value
// embeddings, v += layer l's embedding of each row's token.
static void project_qkv(const Forward *f, int l, const BlockBuffers *b) {
    const GPT *model = f->model;
    const QueryRows *q = &b->queries;
    float *const qkv[3] = {b->q_raw, b->k_raw, b->v};
    int C = model->config.dim;
    if (layer0_by_table(f, l)) {
        layer0_qkv_from_table(f, b);
    } else if (f->packed) {
        packed_qkv(f->packed, model, l, qkv, b->ln, f->rows, q->first, q->step, q->rows);
    } else {
        if (q->rows != f->rows)
            die("transformer_forward: the model's products take every row's query");
        const float *w_qkv[3], *b_qkv[3];
        for (int i = 0; i < 3; i++) {
            w_qkv[i] = param_slice(model, &model->params, qkv_weights[i], l);
            b_qkv[i] = param_bias(model, &model->params, qkv_weights[i], l);
        }
        int ic, oc;
        weight_widths(&model->config, qkv_weights[0], &ic, &oc);
        linear_forward_shared_input(f->products, qkv, b->ln, w_qkv, b_qkv, 3, f->rows, ic, oc);
    }
    if (!model->config.value_embed) return;
    const float *table = value_embed_table(model, &model->params, l);
    for (int gi = 0; gi < f->group_count; gi++) {
        const RowGroup *g = &f->groups[gi];
        if (g->token_stride == g->n) // the samples' tokens one after the other: one call
            value_embed_forward(b->v + (long)g->first_row * C, table, g->tokens + g->pos,
                                f->samples * g->n, C);
        else
            for (int s = 0; s < f->samples; s++)
                value_embed_forward(b->v + ((long)g->first_row + (long)s * g->n) * C, table,
                                    g->tokens + s * g->token_stride + g->pos, g->n, C);
    }
}

// Layer l's buffers: the Forward's layer 0's, the saved ones l *
// layer_rows rows on (each its width a row), x_in the stream into it.
static BlockBuffers block_buffers(const Forward *f, int l, const float *x_in) {
    const GPTConfig *cfg = &f->model->config;
    BlockBuffers b = f->buffers;
    long rows = l * f->layer_rows, C = cfg->dim, NH = cfg->heads, T = f->model->cur_T;
    long fc = (long)mlp_inputs(cfg);
#define LAYER_ROWS(view, width) \
    if (b.view) b.view += rows * (width)
    LAYER_ROWS(ln1_mean, 1); LAYER_ROWS(ln1_rstd, 1);
    LAYER_ROWS(q_raw, C); LAYER_ROWS(k_raw, C); LAYER_ROWS(q_rstd, NH); LAYER_ROWS(k_rstd, NH);
    LAYER_ROWS(q, C); LAYER_ROWS(k, C); LAYER_ROWS(v, C);
    LAYER_ROWS(att_probs, NH * T); LAYER_ROWS(att_stats, NH * 2);
    LAYER_ROWS(att_out, C); LAYER_ROWS(residual2, C);
    LAYER_ROWS(ln2_mean, 1); LAYER_ROWS(ln2_rstd, 1);
    LAYER_ROWS(fc, fc); LAYER_ROWS(x_out, C);
#undef LAYER_ROWS
    b.x_in = x_in;
    if (l == cfg->layers - 1) b.queries = f->last_queries;
    return b;
}

// Block l over the forward's R rows: x_in (R,C) -> norm 1 -> q, k, v (R,C)
// (q and k normalised and rotated as the config says) -> attention ->
// att_out (rows,C) -> W_O -> residual2 = x_in + that; -> norm 2 -> fc
// (rows,GATES*H) -> the activation (rows,H) -> W_proj -> x_out (rows,C) =
// residual2 + that. rows: the queries' (R, but in the KV cache's last
// layer), returned; the stream's rows that go on move to the front.
static int block_forward(const Forward *f, int l, const BlockBuffers *b) {
    const GPTConfig *cfg = &f->model->config;
    LayerParams p = layer_params(f->model, &f->model->params, l);
    int C = cfg->dim, R = f->rows;
    const Dropout *drop = f->dropout;
    BlockMasks masks =
        drop ? block_masks(drop, l, cfg->heads, f->model->cur_T, C) : (BlockMasks){0};

    // x += Attn(norm1(x)) W_O^T + b_O
    if (!layer0_by_table(f, l)) // else the table holds the projections of norm1's rows
        norm_forward(cfg, b->ln, b->ln1_mean, b->ln1_rstd, b->x_in, p.ln1_w, p.ln1_b, R);
    project_qkv(f, l, b);
    queries_keys_forward(f->model, &p, b, R);
    const QueryRows *q = &b->queries;
    const float *x_in = b->x_in;
    if (q->first != 0 || q->step != 1) { // only the queries' rows of the stream go on
        for (int i = 0; i < q->rows; i++)
            memmove(b->residual2 + (long)i * C, x_in + ((long)q->first + (long)i * q->step) * C,
                    (size_t)C * sizeof(float));
        x_in = b->residual2;
    }
    f->attend(f, l, b);
    int rows = q->rows;
    long rc = (long)rows * C;
    const ForwardHooks *hooks = f->hooks;
    if (hooks && hooks->attention_output) hooks->attention_output(hooks, l, b->att_out, rows);
    forward_linear(f, l, PARAM_w_o, b->proj_out, b->att_out, rows);
    if (drop)
        dropout_forward(b->proj_out, b->proj_out, rc, 0, &masks.att_proj);
    if (hooks && hooks->sublayer_output)
        hooks->sublayer_output(hooks, l, SUBLAYER_ATTENTION, b->proj_out, rows);
    residual_forward(b->residual2, x_in, b->proj_out, rc);
    // x += act(norm2(x) W_fc^T + b_fc) W_proj^T + b_proj
    norm_forward(cfg, b->ln, b->ln2_mean, b->ln2_rstd, b->residual2, p.ln2_w, p.ln2_b, rows);
    forward_linear(f, l, PARAM_fc_w, b->fc, b->ln, rows);
    mlp_activation_forward(cfg, b->fc_act, b->fc, rows);
    forward_linear(f, l, PARAM_proj_w, b->proj_out, b->fc_act, rows);
    if (drop)
        dropout_forward(b->proj_out, b->proj_out, rc, 0, &masks.mlp_proj);
    if (hooks && hooks->sublayer_output)
        hooks->sublayer_output(hooks, l, SUBLAYER_MLP, b->proj_out, rows);
    residual_forward(b->x_out, b->residual2, b->proj_out, rc);
    return rows;
}

int transformer_forward(const Forward *f) {
    const GPTConfig *cfg = &f->model->config;
    const ParameterTensors *p = &f->model->params;
    int C = cfg->dim, rows = f->rows, first = f->first_layer;
    const ForwardHooks *hooks = f->hooks;
    if (first == 0) {
        // With dropout (nanoGPT's four places): the embedding sum, the
        // attention probabilities, and the outputs of W_O and of the MLP
        // projection, each before it joins the residual stream.
        embed_rows(f, f->embedded, f->buffers.ln, f->buffers.proj_out);
        if (f->dropout) {
            DropoutMask m =
                dropout_mask(f->dropout, DROPOUT_EMBEDDING, 0, (long)f->model->cur_T * C);
            dropout_forward(f->embedded, f->embedded, (long)rows * C, 0, &m);
        }
        if (hooks && hooks->stream) hooks->stream(hooks, 0, f->embedded, rows);
    }
    const float *x_out = first == 0 ? f->embedded : f->start_stream;
    for (int l = first; l < cfg->layers; l++) {
        BlockBuffers b = block_buffers(f, l, x_out);
        rows = block_forward(f, l, &b);
        x_out = b.x_out;
        if (hooks && hooks->stream) hooks->stream(hooks, l + 1, x_out, rows);
    }
    // logits (rows,V) = norm_f(x) . W_U^T, W_U wte (tied) or lm_head;
    // with a softcap, then cap * tanh(logits / cap)
    norm_forward(cfg, f->lnf, f->lnf_mean, f->lnf_rstd, x_out, p->lnf_w, p->lnf_b, rows);
    forward_linear(f, -1, gpt_unembedding(cfg), f->logits, f->lnf, rows);
    if (cfg->softcap > 0)
        softcap_forward(f->logits, f->logits, cfg->softcap, (long)rows * cfg->vocab_size);
    return rows;
}

// Every token at every position of the table (learned positions: T; with
// RoPE one, its rotation coming after the products), as many whole tokens'
// rows at a time as the scratch holds: embedded, normed and projected as
// the forward does a row.
void transformer_layer0_table(const GPT *model, const PackedWeights *w, int rows_at_most, int *tokens,
                              float *x, float *ln, float *mean, float *rstd) {
    const GPTConfig *cfg = &model->config;
    const ParameterTensors *p = &model->params;
    int V = cfg->vocab_size, C = cfg->dim, P = w->layer0_positions, tokens_at_once = rows_at_most / P;
    long third = (long)V * P * C;
    if (tokens_at_once < 1)
        die("transformer_layer0_table: scratch of %d rows, %d positions", rows_at_most, P);
    LayerParams layer0 = layer_params(model, p, 0);
    for (int t0 = 0; t0 < V; t0 += tokens_at_once) {
        int count = V - t0 < tokens_at_once ? V - t0 : tokens_at_once, rows = count * P;
        for (int r = 0; r < rows; r++) tokens[r] = t0 + r / P;
        embedding_forward(x, tokens, p->wte, position_embedding(model, p), count, P, C);
        norm_forward(cfg, ln, mean, rstd, x, layer0.ln1_w, layer0.ln1_b, rows);
        float *q = w->layer0_qkv + (long)t0 * P * C;
        float *const qkv[3] = {q, q + third, q + 2 * third};
        packed_qkv(w, model, 0, qkv, ln, rows, 0, 1, rows);
    }
}

// ---- gpt_forward: the Forward over a batch of B x T positions, its
// activations saved for the backward

// Layer 0's buffers over the last forward's B x T: its saved activations
// (each layer's R = B*T rows on: block_buffers) and the scratch every
// layer reuses.
static BlockBuffers batch_buffers(const GPT *model) {
    const Activations *a = &model->acts;
    const Scratch *s = &model->scratch;
    int qk_norm = model->config.qk_norm, BT = model->cur_B * model->cur_T;
    return (BlockBuffers){.x_in = a->encoded,
                          .ln = s->ln,
                          .ln1_mean = a->ln1_mean,
                          .ln1_rstd = a->ln1_rstd,
                          .q_raw = qk_norm ? a->q_raw : a->q,
                          .k_raw = qk_norm ? a->k_raw : a->k,
                          .q_rstd = qk_norm ? a->q_rstd : NULL,
                          .k_rstd = qk_norm ? a->k_rstd : NULL,
                          .q = a->q,
                          .k = a->k,
                          .v = a->v,
                          .queries = {BT, 0, 1, s->positions},
                          .positions = s->positions,
                          .att_probs = a->att_probs,
                          .att_stats = a->att_probs ? NULL : a->att_stats,
                          .att_out = a->att_out,
                          .proj_out = s->proj_out,
                          .residual2 = a->residual2,
                          .ln2_mean = a->ln2_mean,
                          .ln2_rstd = a->ln2_rstd,
                          .fc = a->fc,
                          .fc_act = s->fc_act,
                          .x_out = a->residual3};
}

// The fused attention, or the unfused one keeping the probabilities, as
// the caller asked (gpt.h: Attention probabilities); with the key offset,
// over the keys shifted within each window of T positions (in place: the
// saved k is what the attention read).
static void batch_attend(const Forward *f, int l, const BlockBuffers *b) {
    const GPT *model = f->model;
    int B = model->cur_B, T = model->cur_T, C = model->config.dim, NH = model->config.heads;
    if (model->config.key_offset) key_offset_forward(b->k, B, T, C, NH);
    BlockMasks masks = f->dropout ? block_masks(f->dropout, l, NH, T, C) : (BlockMasks){0};
    const DropoutMask *drop = f->dropout ? &masks.att_probs : NULL;
    if (b->att_probs) {
        attention_forward_dropout(f->products, b->att_out, b->att_probs, b->q, b->k, b->v, B, T, T,
                                  C, NH, 1, drop);
        const ForwardHooks *hooks = f->hooks;
        if (hooks && hooks->attention_probs) { // gpt_forward: no dropout then
            hooks->attention_probs(hooks, l, b->att_probs, B, T);
            attention_values_forward(f->products, b->att_out, b->att_probs, b->v, B, T, T, C, NH,
                                     1);
        }
    } else
        attention_forward_fused(f->products, b->att_out, b->att_stats, b->q, b->k, b->v, B, T, C,
                                NH, drop);
}

// The batch's Forward over tokens (B,T), the last forward's B x T (what
// gpt_forward's caller asked for aside).
static Forward batch_forward(GPT *model, const int *tokens) {
    Activations *a = &model->acts;
    int B = model->cur_B, T = model->cur_T, BT = B * T;
    BlockBuffers buffers = batch_buffers(model);
    return (Forward){.model = model,
                     .rows = BT,
                     .samples = B,
                     .groups = {{.tokens = tokens, .token_stride = T, .pos = 0, .n = T}},
                     .group_count = 1,
                     .buffers = buffers,
                     .layer_rows = BT,
                     .last_queries = buffers.queries, // every row's, as in every layer
                     .products = &model->products,
                     .embedded = a->encoded,
                     .lnf = a->lnf,
                     .lnf_mean = a->lnf_mean,
                     .lnf_rstd = a->lnf_rstd,
                     .logits = model->scratch.logits,
                     .attend = batch_attend};
}

// Layer l's saved activations, as the last forward over the batch left
// them: the stream into it block l-1's output.
static BlockBuffers layer_buffers(GPT *model, int l) {
    Forward f = batch_forward(model, NULL); // its buffers only
    const Activations *a = &model->acts;
    long btc = (long)model->cur_B * model->cur_T * model->config.dim;
    return block_buffers(&f, l, l == 0 ? a->encoded : a->residual3 + (l - 1) * btc);
}

float gpt_forward(GPT *model, const int *tokens, int B, int T, ForwardArgs args) {
    const GPTConfig *cfg = &model->config;
    int V = cfg->vocab_size, first = args.first_layer;
    if (!model->acts_memory || B > model->batch_size || T > model->seq_len || T > cfg->context)
        die("gpt_forward: batch %dx%d exceeds the allocated %dx%d (context %d)", B, T,
            model->batch_size, model->seq_len, cfg->context);
    if (first < 0 || first >= cfg->layers || (first > 0 && !args.start_stream))
        die("gpt_forward: from block %d of %d (a stream into it: %s)", first, cfg->layers,
            args.start_stream ? "given" : "none");
    if (args.hooks && args.hooks->attention_probs &&
        (args.attention != ATTENTION_KEEP_PROBS || args.dropout))
        die("gpt_forward: the attention_probs hook changes the unfused attention's "
            "probabilities: ATTENTION_KEEP_PROBS without dropout");
    int training = model->backward_memory != NULL; // allocated by gpt_alloc_training
    if (args.attention == ATTENTION_FUSED && !training)
        die("gpt_forward: the fused attention keeps what a backward needs, in a model allocated "
            "with gpt_alloc_training; this one was allocated for inference");
    if (model->cur_B != B || model->cur_T != T)
        activation_layout(cfg, &model->acts, B, T, training, model->acts_memory);
    model->cur_B = B;
    model->cur_T = T;
    Activations *a = &model->acts;
    // a training model keeps probabilities in a buffer of their own
    if (training)
        a->att_probs = args.attention == ATTENTION_FUSED
                           ? NULL
                           : growing_buffer(&model->att_probs_memory,
                                            (size_t)cfg->layers * B * cfg->heads * T * T *
                                                sizeof(float));
    int BT = B * T;
    if (model->scratch.positions)
        for (int r = 0; r < BT; r++) model->scratch.positions[r] = r % T;
    Forward f = batch_forward(model, tokens);
    f.dropout = args.dropout;
    f.first_layer = first;
    f.start_stream = args.start_stream;
    f.hooks = args.hooks;
    transformer_forward(&f);
    if (args.targets) {
        memcpy(model->targets, args.targets, (size_t)BT * sizeof(int));
        model->mean_loss =
            crossentropy_forward(a->probs, a->losses, f.logits, args.targets, BT, V);
    } else {
        crossentropy_forward(a->probs, NULL, f.logits, NULL, BT, V);
        model->mean_loss = -1.0f;
    }
    model->backward_ready = args.targets && args.attention == ATTENTION_FUSED && first == 0;
    return model->mean_loss;
}

// ---- the backward

// A buffer's life ends here (gpt.c: the backward's buffers that share
// memory): built with GPT_CHECK_BUFFER_LIVES, it is filled with NaN.
static void life_ends(float *buffer, long n) {
#ifdef GPT_CHECK_BUFFER_LIVES
    for (long i = 0; i < n; i++) buffer[i] = NAN;
#else
    (void)buffer, (void)n;
#endif
}

void gpt_zero_grad(const GPT *model, float *grads_memory) {
    memset(grads_memory, 0, model->num_params * sizeof(float));
}

// Block l's backward, over the last forward's B x T. d_residual (B,T,C)
// holds dL/d(residual3) on entry and dL/d(x_in) on exit, x_in being the
// stream into the block; the block's gradients accumulate into grads.
static void block_backward(GPT *model, int l, const int *tokens, const Dropout *drop,
                           const ParameterTensors *grads) {
    const GPTConfig *cfg = &model->config;
    int C = cfg->dim, NH = cfg->heads, hs = C / NH, B = model->cur_B, T = model->cur_T, BT = B * T;
    long btc = (long)BT * C, fc = (long)mlp_inputs(cfg) * BT, act = (long)gpt_mlp_hidden(cfg) * BT;
    LayerParams p = layer_params(model, &model->params, l), g = layer_params(model, grads, l);
    BlockBuffers b = layer_buffers(model, l);
    Scratch *s = &model->scratch;
    float *att_stats = model->acts.att_stats + 2L * l * B * NH * T;
    int ic, oc;

    // d_residual holds dL/d(residual3). residual3 = residual2 + proj(act(fc)).
    // act(fc) and norm 2's output are recomputed rather than stored
    mlp_activation_forward(cfg, s->fc_act, b.fc, BT);
    norm_forward(cfg, b.ln, b.ln2_mean, b.ln2_rstd, b.residual2, p.ln2_w, p.ln2_b, BT);
    BlockMasks masks = drop ? block_masks(drop, l, NH, T, C) : (BlockMasks){0};
    // d_proj: the gradient reaching a projection's output, d_residual
    // itself, or without dropout's mask d_ln (free until norm 2's backward)
    const float *d_proj = s->d_residual;
    if (drop) {
        zero_floats(s->d_ln, btc);
        dropout_backward(s->d_ln, s->d_residual, btc, 0, &masks.mlp_proj);
        d_proj = s->d_ln;
    }
    zero_floats(s->d_fc_act, act);
    weight_widths(cfg, PARAM_proj_w, &ic, &oc);
    linear_backward(&model->products, s->d_fc_act, g.proj_w, g.proj_b, d_proj, s->fc_act,
                    p.proj_w, BT, ic, oc);
    life_ends(s->fc_act, act);
    zero_floats(s->d_fc, fc);
    mlp_activation_backward(cfg, s->d_fc, b.fc, s->d_fc_act, BT);
    life_ends(s->d_fc_act, act);
    zero_floats(s->d_ln, btc);
    weight_widths(cfg, PARAM_fc_w, &ic, &oc);
    linear_backward(&model->products, s->d_ln, g.fc_w, g.fc_b, s->d_fc, b.ln, p.fc_w, BT, ic, oc);
    life_ends(s->d_fc, fc);
    // the residual path passes d_residual through; norm 2's path adds to it
    norm_backward(cfg, s->d_residual, g.ln2_w, g.ln2_b, s->d_ln, b.residual2, p.ln2_w, b.ln2_mean,
                  b.ln2_rstd, BT);

    // d_residual holds dL/d(residual2). residual2 = x_in + W_O(attn(q,k,v)).
    if (drop) {
        zero_floats(s->d_ln, btc);
        dropout_backward(s->d_ln, s->d_residual, btc, 0, &masks.att_proj);
    }
    zero_floats(s->d_att_out, btc);
    weight_widths(cfg, PARAM_w_o, &ic, &oc);
    linear_backward(&model->products, s->d_att_out, g.w_o, g.b_o, d_proj, b.att_out, p.w_o, BT, ic,
                    oc);
    zero_floats(s->d_q, btc);
    zero_floats(s->d_k, btc);
    zero_floats(s->d_v, btc);
    attention_backward_fused(&model->products, s->d_q, s->d_k, s->d_v, s->d_att_out, b.att_out,
                             att_stats, b.q, b.k, b.v, B, T, C, NH, drop ? &masks.att_probs : NULL);
    life_ends(s->d_att_out, btc);
    if (cfg->key_offset) key_offset_backward(s->d_k, B, T, C, NH); // back to the unshifted keys
    if (cfg->value_embed)
        value_embed_backward(value_embed_table(model, grads, l), s->d_v, tokens, BT, C);
    // back through RoPE (the inverse rotation, in place) and qk_norm
    float *d_q_raw = s->d_q, *d_k_raw = s->d_k;
    if (cfg->pos == POS_ROPE) {
        rope_backward(s->d_q, model->rope_table, b.queries.positions, BT, C, NH);
        rope_backward(s->d_k, model->rope_table, b.positions, BT, C, NH);
    }
    if (cfg->qk_norm) {
        d_q_raw = s->d_q_raw, d_k_raw = s->d_k_raw;
        zero_floats(d_q_raw, btc);
        zero_floats(d_k_raw, btc);
        rmsnorm_backward(d_q_raw, g.q_norm_w, s->d_q, b.q_raw, p.q_norm_w, b.q_rstd, BT * NH, hs);
        rmsnorm_backward(d_k_raw, g.k_norm_w, s->d_k, b.k_raw, p.k_norm_w, b.k_rstd, BT * NH, hs);
        life_ends(s->d_q, btc), life_ends(s->d_k, btc);
    }
    zero_floats(s->d_ln, btc);
    // norm 1's output, recomputed (the buffer held norm 2's until here)
    norm_forward(cfg, b.ln, b.ln1_mean, b.ln1_rstd, b.x_in, p.ln1_w, p.ln1_b, BT);
    // d_ln += d_q . W_Q + d_k . W_K + d_v . W_V (in that order);
    // d_W_X += d_X^T . ln1, d_b_X += column sums of d_X, for X = Q, K, V
    float *d_w_qkv[3], *d_b_qkv[3];
    const float *w_qkv[3];
    for (int i = 0; i < 3; i++) {
        d_w_qkv[i] = param_slice(model, grads, qkv_weights[i], l);
        d_b_qkv[i] = param_bias(model, grads, qkv_weights[i], l);
        w_qkv[i] = param_slice(model, &model->params, qkv_weights[i], l);
    }
    const float *d_qkv[3] = {d_q_raw, d_k_raw, s->d_v};
    weight_widths(cfg, qkv_weights[0], &ic, &oc);
    linear_backward_shared_input(&model->products, s->d_ln, d_w_qkv, d_b_qkv, d_qkv, b.ln, w_qkv, 3,
                                 BT, ic, oc);
    life_ends(d_q_raw, btc), life_ends(d_k_raw, btc), life_ends(s->d_v, btc);
    norm_backward(cfg, s->d_residual, g.ln1_w, g.ln1_b, s->d_ln, b.x_in, p.ln1_w, b.ln1_mean,
                  b.ln1_rstd, BT);
    // d_residual now holds dL/d(x_in)
}

void gpt_backward(GPT *model, const int *tokens, const Dropout *drop, float *grads_memory) {
    if (!model->backward_ready)
        die("gpt_backward: the last forward was not a training forward (targets, "
            "ATTENTION_FUSED, every block)");
    const GPTConfig *cfg = &model->config;
    int L = cfg->layers, C = cfg->dim, V = cfg->vocab_size;
    int B = model->cur_B, T = model->cur_T, BT = B * T;
    long btc = (long)BT * C;
    ParameterTensors *p = &model->params, grads, *g = &grads;
    param_views(g, grads_memory, cfg);
    Activations *a = &model->acts;
    Scratch *s = &model->scratch;
    long row_tc = (long)T * C;
    life_ends(s->proj_out, btc); // the forward's; the backward's d_att_out may share it

    // loss = mean over B*T of the cross-entropies
    zero_floats(s->d_logits, (long)BT * V);
    crossentropy_backward(s->d_logits, a->probs, model->targets, BT, V, 1.0f / BT);
    // d_logits: the gradient of the logits the loss read; with a softcap,
    // through it (its output, the capped logits, is still in logits)
    const float *d_logits = s->d_logits;
    if (cfg->softcap > 0) {
        zero_floats(s->d_uncapped, (long)BT * V);
        softcap_backward(s->d_uncapped, s->logits, s->d_logits, cfg->softcap, (long)BT * V);
        d_logits = s->d_uncapped;
    }
    zero_floats(s->d_ln, btc);
    int unembedding = gpt_unembedding(cfg);
    linear_backward(&model->products, s->d_ln, param_tensor(g, unembedding), NULL, d_logits,
                    a->lnf, param_tensor(p, unembedding), BT, C, V);
    const float *x_last = L > 0 ? a->residual3 + (L - 1) * btc : a->encoded;
    zero_floats(s->d_residual, btc);
    norm_backward(cfg, s->d_residual, g->lnf_w, g->lnf_b, s->d_ln, x_last, p->lnf_w, a->lnf_mean,
                  a->lnf_rstd, BT);

    // d_residual holds dL/d(x_last), the last block's residual3
    for (int l = L - 1; l >= 0; l--)
        block_backward(model, l, tokens, drop, g);
    // d_residual holds dL/d(encoded)
    const float *d_encoded = s->d_residual;
    if (drop) {
        DropoutMask m = dropout_mask(drop, DROPOUT_EMBEDDING, 0, row_tc);
        zero_floats(s->d_ln, btc);
        dropout_backward(s->d_ln, s->d_residual, btc, 0, &m);
        d_encoded = s->d_ln;
    }
    if (cfg->smear) { // through the smear to the sum it read, recomputed into ln
        float *d_sum = d_encoded == s->d_ln ? s->d_residual : s->d_ln;
        embedding_forward(s->ln, tokens, p->wte, position_embedding(model, p), B, T, C);
        zero_floats(d_sum, btc);
        smear_backward(d_sum, g->smear_gate, g->smear_lambda, d_encoded, s->ln, p->smear_gate,
                       p->smear_lambda, B, T, C, gpt_smear_width(cfg));
        d_encoded = d_sum;
    }
    embedding_backward(g->wte, position_embedding(model, g), d_encoded, tokens, B, T, C);
}

const float *gpt_attention_probs(const GPT *model, int layer, int head, int batch_row) {
    int B = model->cur_B, T = model->cur_T, NH = model->config.heads;
    if (!model->acts.att_probs)
        die("gpt_attention_probs: the last forward ran the fused attention (ATTENTION_FUSED), "
            "which keeps no attention probabilities");
    return model->acts.att_probs + ((((long)layer * B + batch_row) * NH + head) * T * T);
}
