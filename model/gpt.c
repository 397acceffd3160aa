// gpt.c: the GPT's buffers, initialisation, forward and backward.
#include "gpt.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "../kernels/matmul.h"
#include "ops.h"
#include "profile.h"
#include "../base/util.h"

#ifdef PROFILE_OPS
double op_seconds[NUM_PROFILED_OPS];
const char *const op_names[NUM_PROFILED_OPS] = {
    "matmul forward",      "matmul backward", "attention forward",        "attention backward",
    "layernorm (fwd+bwd)", "gelu (fwd+bwd)",  "softmax + loss (fwd+bwd)", "embedding + residual"};
#endif

// ---- parameters

const ParamSpec param_specs[NUM_PARAM_TENSORS] = {
#define GPT_PARAM_SPEC(view, name, rows, cols, stacked, decayed, init) {name, stacked, decayed, init},
    GPT_PARAMETER_TENSORS(GPT_PARAM_SPEC)
#undef GPT_PARAM_SPEC
};

void param_shape(const GPTConfig *cfg, int i, long *rows, long *cols) {
    // V, T and C are the names the table's shapes are written in.
    long V = cfg->vocab_size, T = cfg->context, C = cfg->dim;
    const long shapes[NUM_PARAM_TENSORS][2] = {
#define GPT_PARAM_SHAPE(view, name, rows, cols, ...) {rows, cols},
        GPT_PARAMETER_TENSORS(GPT_PARAM_SHAPE)
#undef GPT_PARAM_SHAPE
    };
    (void)V, (void)T;
    *rows = shapes[i][0];
    *cols = shapes[i][1];
}

void param_sizes(const GPTConfig *cfg, size_t sizes[NUM_PARAM_TENSORS]) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        long rows, cols;
        param_shape(cfg, i, &rows, &cols);
        size_t slice = (size_t)rows * (size_t)(cols ? cols : 1);
        sizes[i] = param_specs[i].stacked ? (size_t)cfg->layers * slice : slice;
    }
}

void param_views(ParameterTensors *views, float *memory, const GPTConfig *cfg) {
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(cfg, sizes);
    float **ptrs[NUM_PARAM_TENSORS] = {
#define GPT_PARAM_POINTER(view, ...) &views->view,
        GPT_PARAMETER_TENSORS(GPT_PARAM_POINTER)
#undef GPT_PARAM_POINTER
    };
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        *ptrs[i] = memory;
        memory += sizes[i];
    }
}

float *param_tensor(const ParameterTensors *views, int i) {
    float *const tensors[NUM_PARAM_TENSORS] = {
#define GPT_PARAM_TENSOR(view, ...) views->view,
        GPT_PARAMETER_TENSORS(GPT_PARAM_TENSOR)
#undef GPT_PARAM_TENSOR
    };
    return tensors[i];
}

int param_is_decayed(int i) { return param_specs[i].decayed; }

const char *gpt_first_non_finite(const GPT *model, const float *memory, char *name, size_t len) {
    size_t offset = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t n = model->param_sizes[t];
        for (size_t i = 0; i < n; i++)
            if (!isfinite(memory[offset + i])) {
                if (!param_specs[t].stacked)
                    snprintf(name, len, "%s", param_specs[t].name);
                else
                    snprintf(name, len, "h.%zu.%s", i / (n / model->config.layers),
                             param_specs[t].name);
                return name;
            }
        offset += n;
    }
    return NULL;
}

int gpt_config_valid(const GPTConfig *cfg, char *err, size_t err_len) {
    struct {
        const char *name;
        int value, max;
    } fields[] = {{"vocab_size", cfg->vocab_size, 65535},
                  {"context", cfg->context, 1 << 16},
                  {"layers", cfg->layers, 1024},
                  {"heads", cfg->heads, 4096},
                  {"dim", cfg->dim, 1 << 16}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (fields[i].value < 1 || fields[i].value > fields[i].max) {
            set_error(err, err_len, "%s is %d, must be between 1 and %d", fields[i].name,
                      fields[i].value, fields[i].max);
            return 0;
        }
    }
    if (cfg->dim % cfg->heads != 0) {
        set_error(err, err_len, "dim %d is not divisible by heads %d", cfg->dim, cfg->heads);
        return 0;
    }
    return 1;
}

void gpt_build(GPT *model, const GPTConfig *cfg) {
    memset(model, 0, sizeof *model);
    model->config = *cfg;
    param_sizes(cfg, model->param_sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        model->num_params += model->param_sizes[i];
    model->params_memory = xcalloc(model->num_params, sizeof(float));
    param_views(&model->params, model->params_memory, cfg);
    model->mean_loss = -1.0f;
}

void gpt_init_params(GPT *model, unsigned long long seed) {
    Rng rng;
    rng_seed(&rng, seed);
    const float std = 0.02f, residual_std = 0.02f / sqrtf(2.0f * model->config.layers);
    float *t = model->params_memory;
    // One stream, drawn in memory order, for the normal tensors only.
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = model->param_sizes[i];
        ParamInit init = param_specs[i].init;
        for (size_t j = 0; j < n; j++)
            t[j] = init == INIT_NORMAL     ? std * rng_normal(&rng)
                   : init == INIT_RESIDUAL ? residual_std * rng_normal(&rng)
                   : init == INIT_ONE      ? 1.0f
                                           : 0.0f;
        t += n;
    }
}

// ---- buffers
//
// Each buffer's layout is one function that, given its memory, points the
// views into it, and given NULL, only adds up the sizes. The allocation and
// the memory estimate (gpt_memory_bytes) both call it, so they cannot
// disagree. Sizes are counted in double: an estimate must not overflow for
// absurd shapes (it exists to refuse them), and double is exact to 2^53.

typedef struct {
    float **view;
    double floats;
} BufferView;

static double lay_out(const BufferView *views, size_t n, float *memory) {
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        if (memory) *views[i].view = memory + (size_t)total;
        total += views[i].floats;
    }
    return total;
}

// The saved activations for a batch of B x T.
static double activation_layout(const GPTConfig *cfg, Activations *a, int B, int T,
                                float *memory) {
    double L = cfg->layers, C = cfg->dim, NH = cfg->heads, V = cfg->vocab_size;
    double BT = (double)B * T;
    const BufferView layout[] = {
        {&a->encoded, BT * C},         {&a->ln1_mean, L * BT},       {&a->ln1_rstd, L * BT},
        {&a->q, L * BT * C},           {&a->k, L * BT * C},          {&a->v, L * BT * C},
        {&a->att_probs, L * B * NH * T * T}, {&a->att_out, L * BT * C}, {&a->residual2, L * BT * C},
        {&a->ln2_mean, L * BT},        {&a->ln2_rstd, L * BT},       {&a->fc, L * BT * 4 * C},
        {&a->residual3, L * BT * C},   {&a->lnf, BT * C},            {&a->lnf_mean, BT},
        {&a->lnf_rstd, BT},            {&a->probs, BT * V},          {&a->losses, BT},
    };
    return lay_out(layout, sizeof layout / sizeof layout[0], memory);
}

// What the forward reuses layer after layer.
static double forward_scratch_layout(const GPTConfig *cfg, Scratch *s, int B, int T,
                                     float *memory) {
    double C = cfg->dim, V = cfg->vocab_size, BT = (double)B * T;
    const BufferView layout[] = {
        {&s->fc_gelu, BT * 4 * C}, {&s->logits, BT * V}, {&s->ln, BT * C}, {&s->proj_out, BT * C}};
    return lay_out(layout, sizeof layout / sizeof layout[0], memory);
}

// What only the backward needs (d_att_out shares proj_out's memory: they
// are never live at once).
static double backward_scratch_layout(const GPTConfig *cfg, Scratch *s, int B, int T,
                                      float *memory) {
    double C = cfg->dim, V = cfg->vocab_size, BT = (double)B * T;
    const BufferView layout[] = {{&s->d_residual, BT * C}, {&s->d_ln, BT * C},
                                 {&s->d_q, BT * C},        {&s->d_k, BT * C},
                                 {&s->d_v, BT * C},        {&s->d_fc, BT * 4 * C},
                                 {&s->d_fc_gelu, BT * 4 * C}, {&s->d_logits, BT * V}};
    double total = lay_out(layout, sizeof layout / sizeof layout[0], memory);
    if (memory) s->d_att_out = s->proj_out;
    return total;
}

// The matrix kernels' workspace: the most that one of the model's linear
// calls takes (matmul.c counts it, from the layouts it uses): each layer,
// and W_Q, W_K, W_V's shared call (today the MLP's layers take more).
static double matmul_workspace_floats(const GPTConfig *cfg, int B, int T) {
    int C = cfg->dim, V = cfg->vocab_size;
    long BT = (long)B * T;
    const int shapes[][2] = {{C, C}, {C, 4 * C}, {4 * C, C}, {C, V}}; // (IC, OC)
    size_t most = linear_shared_workspace_bytes(BT, C, C, 3); // W_Q, W_K, W_V
    for (int i = 0; i < 4; i++) {
        size_t bytes = linear_workspace_bytes(BT, shapes[i][0], shapes[i][1]);
        if (bytes > most) most = bytes;
    }
    return (double)((most + sizeof(float) - 1) / sizeof(float));
}

size_t gpt_num_params(const GPTConfig *cfg) {
    size_t sizes[NUM_PARAM_TENSORS], total = 0;
    param_sizes(cfg, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) total += sizes[i];
    return total;
}

double gpt_memory_bytes(const GPTConfig *cfg, int B, int T, int training) {
    Activations a;
    Scratch s;
    double params = (double)gpt_num_params(cfg);
    // each thread that runs attention keeps its scratch (without dropout's)
    double attention = (double)omp_get_max_threads() *
                       attention_scratch_bytes(T, T, cfg->dim, cfg->heads, training, 0);
    double floats = params + activation_layout(cfg, &a, B, T, NULL) +
                    forward_scratch_layout(cfg, &s, B, T, NULL) +
                    matmul_workspace_floats(cfg, B, T) + attention / sizeof(float);
    if (training) floats += params + backward_scratch_layout(cfg, &s, B, T, NULL);
    return floats * sizeof(float) + (double)B * T * sizeof(int); // + the targets
}

static void free_batch_buffers(GPT *model) {
    free(model->acts_memory);
    free(model->scratch_memory);
    free(model->backward_memory);
    free(model->grads_memory);
    free(model->targets);
    model->acts_memory = model->scratch_memory = model->backward_memory = model->grads_memory = NULL;
    model->targets = NULL;
    memset(&model->scratch, 0, sizeof model->scratch);
}

void gpt_alloc_inference(GPT *model, int B, int T) {
    const GPTConfig *cfg = &model->config;
    free_batch_buffers(model);
    model->batch_size = B;
    model->seq_len = T;
    model->acts_memory =
        xcalloc((size_t)activation_layout(cfg, &model->acts, B, T, NULL), sizeof(float));
    activation_layout(cfg, &model->acts, B, T, model->acts_memory);
    model->scratch_memory =
        xcalloc((size_t)forward_scratch_layout(cfg, &model->scratch, B, T, NULL), sizeof(float));
    forward_scratch_layout(cfg, &model->scratch, B, T, model->scratch_memory);
    model->targets = xcalloc((size_t)B * T, sizeof(int));
    matmul_reserve((long)matmul_workspace_floats(cfg, B, T));
    model->cur_B = B;
    model->cur_T = T;
}

void gpt_alloc_training(GPT *model, int B, int T) {
    const GPTConfig *cfg = &model->config;
    gpt_alloc_inference(model, B, T);
    model->backward_memory =
        xcalloc((size_t)backward_scratch_layout(cfg, &model->scratch, B, T, NULL), sizeof(float));
    backward_scratch_layout(cfg, &model->scratch, B, T, model->backward_memory);
    model->grads_memory = xcalloc(model->num_params, sizeof(float));
    param_views(&model->grads, model->grads_memory, cfg);
}

void gpt_free(GPT *model) {
    free_batch_buffers(model);
    free(model->params_memory);
    memset(model, 0, sizeof *model);
}

// ---- forward and backward

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

// Block l over the forward's B x T: x (B,T,C) is the residual stream into
// it; writes its activations, residual3 (B,T,C) the stream out of it.
static void block_forward(GPT *model, int l, const float *x, const Dropout *drop) {
    const GPTConfig *cfg = &model->config;
    int C = cfg->dim, NH = cfg->heads, B = model->cur_B, T = model->cur_T, BT = B * T;
    long btc = (long)BT * C, cc = (long)C * C;
    ParameterTensors *p = &model->params;
    Activations *a = &model->acts;
    Scratch *s = &model->scratch;
    float *ln1 = s->ln, *q = a->q + l * btc, *k = a->k + l * btc,
          *v = a->v + l * btc;
    float *att_out = a->att_out + l * btc, *residual2 = a->residual2 + l * btc;
    float *ln2 = s->ln, *fc = a->fc + l * 4 * btc;
    float *residual3 = a->residual3 + l * btc;
    float *att_probs = a->att_probs + (long)l * B * NH * T * T;
    BlockMasks masks = drop ? block_masks(drop, l, NH, T, C) : (BlockMasks){0};

    // x += Attn(LN1(x))
    TIMED(OP_LAYERNORM, layernorm_forward(ln1, a->ln1_mean + l * BT, a->ln1_rstd + l * BT, x,
                                          p->ln1_w + l * C, p->ln1_b + l * C, BT, C));
    // q, k, v (B,T,C) = ln1 . W_{Q,K,V}^T + b_{Q,K,V}, one call reading ln1
    float *qkv[3] = {q, k, v};
    const float *w_qkv[3] = {p->w_q + l * cc, p->w_k + l * cc, p->w_v + l * cc};
    const float *b_qkv[3] = {p->b_q + l * C, p->b_k + l * C, p->b_v + l * C};
    TIMED(OP_MATMUL_FWD, linear_forward_shared_input(qkv, ln1, w_qkv, b_qkv, 3, BT, C, C));
    TIMED(OP_ATTN_FWD, attention_forward_dropout(att_out, att_probs, q, k, v, B, T, T, C, NH,
                                                 1, drop ? &masks.att_probs : NULL));
    TIMED(OP_MATMUL_FWD,
          linear_forward(s->proj_out, att_out, p->w_o + l * cc, p->b_o + l * C, BT, C, C));
    if (drop) dropout_forward(s->proj_out, s->proj_out, btc, 0, &masks.att_proj);
    TIMED(OP_EMBED_RESIDUAL, residual_forward(residual2, x, s->proj_out, btc));
    // x += MLP(LN2(x))
    TIMED(OP_LAYERNORM,
          layernorm_forward(ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, residual2,
                            p->ln2_w + l * C, p->ln2_b + l * C, BT, C));
    TIMED(OP_MATMUL_FWD,
          linear_forward(fc, ln2, p->fc_w + 4 * l * cc, p->fc_b + 4 * l * C, BT, C, 4 * C));
    TIMED(OP_GELU, gelu_forward(s->fc_gelu, fc, 4 * btc));
    TIMED(OP_MATMUL_FWD, linear_forward(s->proj_out, s->fc_gelu, p->proj_w + 4 * l * cc,
                                        p->proj_b + l * C, BT, 4 * C, C));
    if (drop) dropout_forward(s->proj_out, s->proj_out, btc, 0, &masks.mlp_proj);
    TIMED(OP_EMBED_RESIDUAL, residual_forward(residual3, residual2, s->proj_out, btc));
}

float gpt_forward(GPT *model, const int *tokens, const int *targets, int B, int T) {
    const GPTConfig *cfg = &model->config;
    int L = cfg->layers, C = cfg->dim, V = cfg->vocab_size;
    if (!model->acts_memory || B > model->batch_size || T > model->seq_len || T > cfg->context)
        die("gpt_forward: batch %dx%d exceeds the allocated %dx%d (context %d)", B, T,
            model->batch_size, model->seq_len, cfg->context);
    if (model->cur_B != B || model->cur_T != T)
        activation_layout(cfg, &model->acts, B, T, model->acts_memory);
    model->cur_B = B;
    model->cur_T = T;
    ParameterTensors *p = &model->params;
    Activations *a = &model->acts;
    Scratch *s = &model->scratch;
    int BT = B * T;
    long btc = (long)BT * C;

    // With dropout (nanoGPT's four places): the embedding sum, the attention
    // probabilities, and the outputs of W_O and of the MLP projection, each
    // before it joins the residual stream.
    const Dropout *drop = model->dropout.p > 0 ? &model->dropout : NULL;
    long row_tc = (long)T * C;
    TIMED(OP_EMBED_RESIDUAL, embedding_forward(a->encoded, tokens, p->wte, p->wpe, B, T, C));
    if (drop) {
        DropoutMask m = dropout_mask(drop, DROPOUT_EMBEDDING, 0, row_tc);
        dropout_forward(a->encoded, a->encoded, btc, 0, &m);
    }
    const float *x = a->encoded; // (B,T,C) the residual stream
    for (int l = 0; l < L; l++) {
        block_forward(model, l, x, drop);
        x = a->residual3 + l * btc;
    }
    TIMED(OP_LAYERNORM,
          layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, x, p->lnf_w, p->lnf_b, BT, C));
    // logits (B,T,V) = lnf . wte^T (tied)
    TIMED(OP_MATMUL_FWD, linear_forward(s->logits, a->lnf, p->wte, NULL, BT, C, V));
    if (targets) {
        memcpy(model->targets, targets, (size_t)BT * sizeof(int));
        TIMED(OP_SOFTMAX_LOSS, model->mean_loss = crossentropy_forward(a->probs, a->losses,
                                                                       s->logits, targets, BT, V));
    } else {
        TIMED(OP_SOFTMAX_LOSS, crossentropy_forward(a->probs, NULL, s->logits, NULL, BT, V));
        model->mean_loss = -1.0f;
    }
    return model->mean_loss;
}

void gpt_zero_grad(GPT *model) {
    if (model->grads_memory)
        memset(model->grads_memory, 0, model->num_params * sizeof(float));
}

// Block l's backward, over the last forward's B x T. d_residual (B,T,C)
// holds dL/d(residual3) on entry and dL/d(x_in) on exit, x_in being the
// stream into the block; the block's gradients accumulate into grads.
static void block_backward(GPT *model, int l, const Dropout *drop) {
    const GPTConfig *cfg = &model->config;
    int C = cfg->dim, NH = cfg->heads, B = model->cur_B, T = model->cur_T, BT = B * T;
    long btc = (long)BT * C, cc = (long)C * C;
    ParameterTensors *p = &model->params, *g = &model->grads;
    Activations *a = &model->acts;
    Scratch *s = &model->scratch;
    const float *x_in = l == 0 ? a->encoded : a->residual3 + (l - 1) * btc;
    float *ln1 = s->ln, *q = a->q + l * btc, *k = a->k + l * btc,
          *v = a->v + l * btc;
    float *att_out = a->att_out + l * btc, *residual2 = a->residual2 + l * btc;
    float *ln2 = s->ln, *fc = a->fc + l * 4 * btc;
    float *att_probs = a->att_probs + (long)l * B * NH * T * T;

    // d_residual holds dL/d(residual3). residual3 = residual2 + proj(gelu(fc)).
    // GELU(fc) and LN2's output are recomputed rather than stored
    TIMED(OP_GELU, gelu_forward(s->fc_gelu, fc, 4 * btc));
    TIMED(OP_LAYERNORM, layernorm_forward(ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT,
                                          residual2, p->ln2_w + l * C, p->ln2_b + l * C, BT,
                                          C));
    BlockMasks masks = drop ? block_masks(drop, l, NH, T, C) : (BlockMasks){0};
    // d_proj: the gradient reaching a projection's output, d_residual
    // itself, or without dropout's mask d_ln (free until LN2's backward)
    const float *d_proj = s->d_residual;
    if (drop) {
        zero_floats(s->d_ln, btc);
        dropout_backward(s->d_ln, s->d_residual, btc, 0, &masks.mlp_proj);
        d_proj = s->d_ln;
    }
    zero_floats(s->d_fc_gelu, 4 * btc);
    TIMED(OP_MATMUL_BWD,
          linear_backward(s->d_fc_gelu, g->proj_w + 4 * l * cc, g->proj_b + l * C,
                          d_proj, s->fc_gelu, p->proj_w + 4 * l * cc, BT, 4 * C, C));
    zero_floats(s->d_fc, 4 * btc);
    TIMED(OP_GELU, gelu_backward(s->d_fc, fc, s->d_fc_gelu, 4 * btc));
    zero_floats(s->d_ln, btc);
    TIMED(OP_MATMUL_BWD, linear_backward(s->d_ln, g->fc_w + 4 * l * cc, g->fc_b + 4 * l * C,
                                         s->d_fc, ln2, p->fc_w + 4 * l * cc, BT, C, 4 * C));
    // the residual path passes d_residual through; LN2's path adds to it
    TIMED(OP_LAYERNORM, layernorm_backward(s->d_residual, g->ln2_w + l * C, g->ln2_b + l * C,
                                           s->d_ln, residual2, p->ln2_w + l * C,
                                           a->ln2_mean + l * BT, a->ln2_rstd + l * BT, BT, C));

    // d_residual holds dL/d(residual2). residual2 = x_in + W_O(attn(q,k,v)).
    if (drop) {
        zero_floats(s->d_ln, btc);
        dropout_backward(s->d_ln, s->d_residual, btc, 0, &masks.att_proj);
    }
    zero_floats(s->d_att_out, btc);
    TIMED(OP_MATMUL_BWD, linear_backward(s->d_att_out, g->w_o + l * cc, g->b_o + l * C,
                                         d_proj, att_out, p->w_o + l * cc, BT, C, C));
    zero_floats(s->d_q, btc);
    zero_floats(s->d_k, btc);
    zero_floats(s->d_v, btc);
    TIMED(OP_ATTN_BWD,
          attention_backward_dropout(s->d_q, s->d_k, s->d_v, s->d_att_out, att_probs, q, k, v,
                                     B, T, T, C, NH, 1, drop ? &masks.att_probs : NULL));
    zero_floats(s->d_ln, btc);
    // LN1's output, recomputed (s->ln held LN2's until here)
    TIMED(OP_LAYERNORM, layernorm_forward(ln1, a->ln1_mean + l * BT, a->ln1_rstd + l * BT,
                                          x_in, p->ln1_w + l * C, p->ln1_b + l * C, BT, C));
    // d_ln += d_q . W_Q + d_k . W_K + d_v . W_V (in that order);
    // d_W_X += d_X^T . ln1, d_b_X += column sums of d_X, for X = Q, K, V
    float *d_w_qkv[3] = {g->w_q + l * cc, g->w_k + l * cc, g->w_v + l * cc};
    float *d_b_qkv[3] = {g->b_q + l * C, g->b_k + l * C, g->b_v + l * C};
    const float *d_qkv[3] = {s->d_q, s->d_k, s->d_v};
    const float *w_qkv[3] = {p->w_q + l * cc, p->w_k + l * cc, p->w_v + l * cc};
    TIMED(OP_MATMUL_BWD, linear_backward_shared_input(s->d_ln, d_w_qkv, d_b_qkv, d_qkv, ln1,
                                                      w_qkv, 3, BT, C, C));
    TIMED(OP_LAYERNORM, layernorm_backward(s->d_residual, g->ln1_w + l * C, g->ln1_b + l * C,
                                           s->d_ln, x_in, p->ln1_w + l * C,
                                           a->ln1_mean + l * BT, a->ln1_rstd + l * BT, BT, C));
    // d_residual now holds dL/d(x_in)
}

void gpt_backward(GPT *model, const int *tokens) {
    if (model->mean_loss < 0)
        die("gpt_backward: the last forward had no targets");
    if (!model->grads_memory)
        die("gpt_backward: the model was allocated for inference (gpt_alloc_inference)");
    const GPTConfig *cfg = &model->config;
    int L = cfg->layers, C = cfg->dim, V = cfg->vocab_size;
    int B = model->cur_B, T = model->cur_T, BT = B * T;
    long btc = (long)BT * C;
    ParameterTensors *p = &model->params, *g = &model->grads;
    Activations *a = &model->acts;
    Scratch *s = &model->scratch;
    const Dropout *drop = model->dropout.p > 0 ? &model->dropout : NULL;
    long row_tc = (long)T * C;

    // loss = mean over B*T of the cross-entropies
    zero_floats(s->d_logits, (long)BT * V);
    TIMED(OP_SOFTMAX_LOSS,
          crossentropy_backward(s->d_logits, a->probs, model->targets, BT, V, 1.0f / BT));
    zero_floats(s->d_ln, btc);
    TIMED(OP_MATMUL_BWD,
          linear_backward(s->d_ln, g->wte, NULL, s->d_logits, a->lnf, p->wte, BT, C, V));
    const float *x_last = L > 0 ? a->residual3 + (L - 1) * btc : a->encoded;
    zero_floats(s->d_residual, btc);
    TIMED(OP_LAYERNORM, layernorm_backward(s->d_residual, g->lnf_w, g->lnf_b, s->d_ln, x_last,
                                           p->lnf_w, a->lnf_mean, a->lnf_rstd, BT, C));

    // d_residual holds dL/d(x_last), the last block's residual3
    for (int l = L - 1; l >= 0; l--) block_backward(model, l, drop);
    // d_residual holds dL/d(encoded)
    const float *d_encoded = s->d_residual;
    if (drop) {
        DropoutMask m = dropout_mask(drop, DROPOUT_EMBEDDING, 0, row_tc);
        zero_floats(s->d_ln, btc);
        dropout_backward(s->d_ln, s->d_residual, btc, 0, &m);
        d_encoded = s->d_ln;
    }
    TIMED(OP_EMBED_RESIDUAL, embedding_backward(g->wte, g->wpe, d_encoded, tokens, B, T, C));
}

const float *gpt_attention_probs(const GPT *model, int layer, int head, int batch_row) {
    int B = model->cur_B, T = model->cur_T, NH = model->config.heads;
    return model->acts.att_probs + ((((long)layer * B + batch_row) * NH + head) * T * T);
}
