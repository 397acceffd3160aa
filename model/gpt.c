// gpt.c: the GPT's buffers, initialisation, forward and backward.
#include "gpt.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "../kernels/matmul.h"
#include "../kernels/parallel.h"
#include "ops.h"
#include "../base/util.h"


// ---- parameters

const ParamSpec param_specs[NUM_PARAM_TENSORS] = {
#define GPT_PARAM_SPEC(view, name, rows, cols, stacked, decayed, init, bias) \
    {name, stacked, decayed, init, PARAM_##bias},
    GPT_PARAMETER_TENSORS(GPT_PARAM_SPEC)
#undef GPT_PARAM_SPEC
};

int gpt_unembedding(const GPTConfig *cfg) { return cfg->untie ? PARAM_lm_head : PARAM_wte; }

int gpt_smear_width(const GPTConfig *cfg) { return cfg->dim < 12 ? cfg->dim : 12; }

int gpt_mlp_hidden(const GPTConfig *cfg) {
    return cfg->mlp == MLP_SWIGLU ? 8 * cfg->dim / 3 : 4 * cfg->dim;
}

void param_shape(const GPTConfig *cfg, int i, long *rows, long *cols) {
    // the names the table's shapes are written in (gpt.h)
    long V = cfg->vocab_size, T = cfg->context, C = cfg->dim, H = gpt_mlp_hidden(cfg);
    long HS = cfg->dim / cfg->heads, GATES = cfg->mlp == MLP_SWIGLU ? 2 : 1;
    long LEARNED = cfg->pos == POS_LEARNED, NORM_BIAS = cfg->norm == NORM_LAYERNORM;
    long QK_NORM = cfg->qk_norm != 0, UNTIED = cfg->untie != 0, SMEAR = cfg->smear != 0;
    long G = gpt_smear_width(cfg), L = cfg->layers, VALUE_EMBED = cfg->value_embed != 0;
    const long shapes[NUM_PARAM_TENSORS][2] = {
#define GPT_PARAM_SHAPE(view, name, rows, cols, ...) {rows, cols},
        GPT_PARAMETER_TENSORS(GPT_PARAM_SHAPE)
#undef GPT_PARAM_SHAPE
    };
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

float *param_slice(const GPT *model, const ParameterTensors *tensors, int i, int l) {
    float *tensor = param_tensor(tensors, i);
    if (!param_specs[i].stacked) return tensor;
    return tensor + (size_t)l * (model->param_sizes[i] / (size_t)model->config.layers);
}

LayerParams layer_params(const GPT *model, const ParameterTensors *tensors, int l) {
    LayerParams lp;
#define GPT_LAYER_SLICE_0(view)
#define GPT_LAYER_SLICE_1(view) lp.view = param_slice(model, tensors, PARAM_##view, l);
#define GPT_LAYER_SLICE(view, name, rows, cols, stacked, ...) GPT_LAYER_SLICE_##stacked(view)
    GPT_PARAMETER_TENSORS(GPT_LAYER_SLICE)
#undef GPT_LAYER_SLICE
#undef GPT_LAYER_SLICE_1
#undef GPT_LAYER_SLICE_0
    return lp;
}

const int qkv_weights[3] = {PARAM_w_q, PARAM_w_k, PARAM_w_v};

void weight_widths(const GPTConfig *cfg, int weight, int *ic, int *oc) {
    long rows, cols;
    param_shape(cfg, weight, &rows, &cols);
    *ic = (int)cols, *oc = (int)rows;
}

float *value_embed_table(const GPT *model, const ParameterTensors *tensors, int l) {
    return tensors->value_embed + (long)l * model->config.vocab_size * model->config.dim;
}

float *param_bias(const GPT *model, const ParameterTensors *tensors, int weight, int l) {
    int bias = param_specs[weight].bias;
    return bias == PARAM_NO_BIAS ? NULL : param_slice(model, tensors, bias, l);
}

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
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) {
        const BlockChoice *c = &gpt_block_choices[i];
        float value = gpt_choice_get(cfg, i);
        if (gpt_choice_in_use(cfg, i) ? gpt_choice_valid(i, value) : value == 0) continue;
        if (!gpt_choice_in_use(cfg, i)) {
            char with[128];
            gpt_choice_needs(cfg, i, with, sizeof with);
            set_error(err, err_len, "%s %g: it goes with %s only", c->key, (double)value, with);
        } else if (c->kind == CHOICE_NUMBER) {
            set_error(err, err_len, "%s %g must be %s", c->key, (double)value, c->range);
        } else {
            set_error(err, err_len, "%s %g: not a block this program knows", c->key, (double)value);
        }
        return 0;
    }
    if (cfg->pos == POS_ROPE && (cfg->dim / cfg->heads) % 2 != 0) {
        set_error(err, err_len, "RoPE rotates pairs of channels: head size %d (dim %d / heads %d) "
                  "must be even", cfg->dim / cfg->heads, cfg->dim, cfg->heads);
        return 0;
    }
    if (cfg->mlp == MLP_SWIGLU && cfg->dim % 3 != 0) {
        set_error(err, err_len, "SwiGLU's hidden width 8 x dim / 3 keeps the MLP's parameters: "
                  "dim %d gives %.2f, not a whole number (take a dim divisible by 3, e.g. %d)",
                  cfg->dim, 8.0 * cfg->dim / 3, (cfg->dim + 2) / 3 * 3);
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
    products_init(&model->products, PRECISION_FP32, bf16_best_kernel(BF16_AMX));
    if (cfg->pos == POS_ROPE) {
        int hs = cfg->dim / cfg->heads;
        model->rope_table = xmalloc((size_t)cfg->context * hs * sizeof(float));
        rope_table(model->rope_table, cfg->context, hs, cfg->rope_base);
    }
}

void gpt_set_precision(GPT *model, Precision precision, Bf16Kernel bf16) {
    model->products.precision = precision;
    model->products.bf16 = bf16;
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
            t[j] = init == INIT_NORMAL || init == INIT_OUTPUT ? std * rng_normal(&rng)
                   : init == INIT_RESIDUAL                  ? residual_std * rng_normal(&rng)
                   : init == INIT_ONE                       ? 1.0f
                                                            : 0.0f;
        t += n;
    }
}

void gpt_zero_init_projections(GPT *model) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (param_specs[i].init == INIT_RESIDUAL || param_specs[i].init == INIT_OUTPUT)
            memset(param_tensor(&model->params, i), 0, model->param_sizes[i] * sizeof(float));
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

// The width of the MLP's first product, GATES*H (fc_w's rows).
static double mlp_inputs(const GPTConfig *cfg) {
    long rows, cols;
    param_shape(cfg, PARAM_fc_w, &rows, &cols);
    return (double)rows;
}

// The saved activations for a batch of B x T: a training model's keep the
// attention's log-sum-exps (L,B,NH,T,2: attention.h), an inference model's its
// probabilities (L,B,NH,T,T) (gpt.h: Attention probabilities).
static double activation_layout(const GPTConfig *cfg, Activations *a, int B, int T,
                                int training, float *memory) {
    double L = cfg->layers, C = cfg->dim, NH = cfg->heads, V = cfg->vocab_size;
    double BT = (double)B * T, fc = mlp_inputs(cfg), qk = cfg->qk_norm != 0;
    const BufferView layout[] = {
        {&a->encoded, BT * C},         {&a->ln1_mean, L * BT},       {&a->ln1_rstd, L * BT},
        {&a->q, L * BT * C},           {&a->k, L * BT * C},          {&a->v, L * BT * C},
        training ? (BufferView){&a->att_stats, L * B * NH * T * 2}
                 : (BufferView){&a->att_probs, L * B * NH * T * T},
        {&a->att_out, L * BT * C}, {&a->residual2, L * BT * C},
        {&a->ln2_mean, L * BT},        {&a->ln2_rstd, L * BT},       {&a->fc, L * BT * fc},
        {&a->residual3, L * BT * C},   {&a->lnf, BT * C},            {&a->lnf_mean, BT},
        {&a->lnf_rstd, BT},            {&a->probs, BT * V},          {&a->losses, BT},
        {&a->q_raw, qk * L * BT * C},  {&a->k_raw, qk * L * BT * C},
        {&a->q_rstd, qk * L * BT * NH}, {&a->k_rstd, qk * L * BT * NH},
    };
    if (memory) {
        if (training) a->att_probs = NULL;
        else a->att_stats = NULL;
    }
    return lay_out(layout, sizeof layout / sizeof layout[0], memory);
}

// What the forward reuses layer after layer.
static double forward_scratch_layout(const GPTConfig *cfg, Scratch *s, int B, int T,
                                     float *memory) {
    double V = cfg->vocab_size, C = cfg->dim, BT = (double)B * T;
    const BufferView layout[] = {{&s->fc_act, BT * mlp_inputs(cfg)}, {&s->logits, BT * V},
                                 {&s->ln, BT * C}, {&s->proj_out, BT * C}};
    return lay_out(layout, sizeof layout / sizeof layout[0], memory);
}

// What only the backward needs. Buffers that never live at once share
// memory; each pair, and the lives that let it (block_backward's order,
// where each life's end is marked with life_ends):
//   d_att_out in proj_out's: proj_out lives within one block's forward;
//   d_fc in fc_act's: GELU's output (recomputed) lives until W_proj's
//     backward reads it, before GELU's backward writes d_fc;
//   d_q, d_k, d_v in d_fc_act's: d_fc_act lives until GELU's backward
//     reads it, before the attention's backward writes them.
// Built with -DGPT_CHECK_BUFFER_LIVES (make sanitize), each has memory of
// its own and life_ends fills a buffer with NaN where its life ends: a
// backward reordered to read a buffer after that turns the gradients to
// NaN, which the gradient checks catch.
#ifdef GPT_CHECK_BUFFER_LIVES
enum { SHARE_BACKWARD_BUFFERS = 0 };
#else
enum { SHARE_BACKWARD_BUFFERS = 1 };
#endif

static void life_ends(float *buffer, long n) {
#ifdef GPT_CHECK_BUFFER_LIVES
    for (long i = 0; i < n; i++) buffer[i] = NAN;
#else
    (void)buffer, (void)n;
#endif
}

static double backward_scratch_layout(const GPTConfig *cfg, Scratch *s, int B, int T,
                                      float *memory) {
    double C = cfg->dim, V = cfg->vocab_size, BT = (double)B * T, H = gpt_mlp_hidden(cfg);
    double own = SHARE_BACKWARD_BUFFERS ? 0 : 1; // the sharing buffers' own memory
    double qk = cfg->qk_norm != 0, capped = cfg->softcap > 0;
    const BufferView layout[] = {{&s->d_residual, BT * C}, {&s->d_ln, BT * C},
                                 {&s->d_fc_act, BT * (H > 3 * C ? H : 3 * C)},
                                 {&s->d_logits, BT * V},
                                 {&s->d_att_out, own * BT * C}, {&s->d_fc, own * BT * mlp_inputs(cfg)},
                                 {&s->d_q, own * BT * C}, {&s->d_k, own * BT * C},
                                 {&s->d_v, own * BT * C},
                                 {&s->d_q_raw, qk * BT * C}, {&s->d_k_raw, qk * BT * C},
                                 {&s->d_uncapped, capped * BT * V}};
    double total = lay_out(layout, sizeof layout / sizeof layout[0], memory);
    if (memory && SHARE_BACKWARD_BUFFERS) {
        size_t btc = (size_t)B * T * cfg->dim;
        s->d_att_out = s->proj_out;
        s->d_fc = s->fc_act;
        s->d_q = s->d_fc_act;
        s->d_k = s->d_fc_act + btc;
        s->d_v = s->d_fc_act + 2 * btc;
    }
    return total;
}

// The matrix kernels' workspace: the most that one of the model's linear
// calls takes (matmul.c counts it, from the layouts it uses): each weight
// of the table, and W_Q, W_K, W_V's shared call.
static double matmul_workspace_floats(const GPTConfig *cfg, Bf16Kernel bf16, int B, int T) {
    long BT = (long)B * T;
    int ic, oc;
    weight_widths(cfg, qkv_weights[0], &ic, &oc);
    size_t most = linear_shared_workspace_bytes(bf16, BT, ic, oc, 3);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (param_specs[i].bias == PARAM_NOT_A_WEIGHT) continue;
        weight_widths(cfg, i, &ic, &oc);
        size_t bytes = linear_workspace_bytes(bf16, BT, ic, oc);
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

// Each thread that runs attention keeps its scratch: training's fused
// attention (dropout's included), inference's unfused forward. Below
// FOR_EACH's threshold (parallel.h) the calling thread runs it alone.
static double attention_scratch_all_threads(const GPTConfig *cfg, Bf16Kernel bf16, int B, int T,
                                            int training) {
    double work = (double)B * T * T * cfg->dim; // B*NH*T*T*hs, the backward's
    int threads = work >= PARALLEL_MIN_WORK ? omp_get_max_threads() : 1;
    return (double)threads *
           (double)(training ? attention_fused_scratch_bytes(bf16, T, cfg->dim, cfg->heads)
                             : attention_scratch_bytes(bf16, T, T, cfg->dim, cfg->heads, 0));
}

double gpt_attention_bytes(const GPTConfig *cfg, Bf16Kernel bf16, int B, int T, int training) {
    double rows = (double)cfg->layers * B * cfg->heads * T; // (L,B,NH,T)
    return (training ? rows * 2 : rows * T) * sizeof(float) +
           attention_scratch_all_threads(cfg, bf16, B, T, training);
}

double gpt_memory_bytes(const GPTConfig *cfg, Bf16Kernel bf16, int B, int T, int training) {
    Activations a;
    Scratch s;
    double params = (double)gpt_num_params(cfg);
    double attention = attention_scratch_all_threads(cfg, bf16, B, T, training);
    double floats = params + activation_layout(cfg, &a, B, T, training, NULL) +
                    forward_scratch_layout(cfg, &s, B, T, NULL) +
                    matmul_workspace_floats(cfg, bf16, B, T) + attention / sizeof(float);
    if (training) floats += params + backward_scratch_layout(cfg, &s, B, T, NULL);
    double ints = (double)B * T * (cfg->pos == POS_ROPE ? 2 : 1); // the targets, the positions
    double rope = cfg->pos == POS_ROPE ? (double)cfg->context * (cfg->dim / cfg->heads) : 0;
    return (floats + rope) * sizeof(float) + ints * sizeof(int);
}

static void free_batch_buffers(GPT *model) {
    free(model->acts_memory);
    free(model->scratch_memory);
    free(model->backward_memory);
    free(model->grads_memory);
    free(model->targets);
    free(model->scratch.positions);
    model->acts_memory = model->scratch_memory = model->backward_memory = model->grads_memory = NULL;
    model->targets = NULL;
    memset(&model->scratch, 0, sizeof model->scratch);
}

// What a forward needs, with a training model's activations when training.
static void alloc_forward_buffers(GPT *model, int B, int T, int training) {
    const GPTConfig *cfg = &model->config;
    free_batch_buffers(model);
    model->batch_size = B;
    model->seq_len = T;
    model->acts_memory =
        xcalloc((size_t)activation_layout(cfg, &model->acts, B, T, training, NULL), sizeof(float));
    activation_layout(cfg, &model->acts, B, T, training, model->acts_memory);
    model->scratch_memory =
        xcalloc((size_t)forward_scratch_layout(cfg, &model->scratch, B, T, NULL), sizeof(float));
    forward_scratch_layout(cfg, &model->scratch, B, T, model->scratch_memory);
    model->targets = xcalloc((size_t)B * T, sizeof(int));
    if (cfg->pos == POS_ROPE) model->scratch.positions = xcalloc((size_t)B * T, sizeof(int));
    products_reserve(&model->products, (size_t)matmul_workspace_floats(cfg, model->products.bf16, B, T) * sizeof(float));
    model->cur_B = B;
    model->cur_T = T;
}

void gpt_alloc_inference(GPT *model, int B, int T) { alloc_forward_buffers(model, B, T, 0); }

void gpt_alloc_training(GPT *model, int B, int T) {
    const GPTConfig *cfg = &model->config;
    alloc_forward_buffers(model, B, T, 1);
    model->backward_memory =
        xcalloc((size_t)backward_scratch_layout(cfg, &model->scratch, B, T, NULL), sizeof(float));
    backward_scratch_layout(cfg, &model->scratch, B, T, model->backward_memory);
    model->grads_memory = xcalloc(model->num_params, sizeof(float));
    param_views(&model->grads, model->grads_memory, cfg);
}

void gpt_free(GPT *model) {
    free_batch_buffers(model);
    free(model->att_probs_memory.data);
    free(model->rope_table);
    products_free(&model->products);
    free(model->params_memory);
    memset(model, 0, sizeof *model);
}

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
    if (cfg->qk_norm) {
        rmsnorm_forward(b->q, b->q_rstd, b->q_raw, p->q_norm_w, b->q_rows * NH, hs);
        rmsnorm_forward(b->k, b->k_rstd, b->k_raw, p->k_norm_w, rows * NH, hs);
    }
    if (cfg->pos == POS_ROPE) {
        rope_forward(b->q, model->rope_table, b->q_positions, b->q_rows, C, NH);
        rope_forward(b->k, model->rope_table, b->positions, rows, C, NH);
    }
}

// Block l over the forward's R rows: x_in (R,C) -> norm 1 -> q, k, v (R,C)
// (q and k normalised and rotated as the config says) -> attention ->
// att_out (rows,C) -> W_O -> residual2 = x_in + that; -> norm 2 -> fc
// (rows,GATES*H) -> the activation (rows,H) -> W_proj -> x_out (rows,C) =
// residual2 + that. rows = R, but in the KV cache's last layer (gpt.h:
// attend); it is returned.
static int block_forward(const Forward *f, int l, const BlockBuffers *b) {
    const GPTConfig *cfg = &f->model->config;
    LayerParams p = layer_params(f->model, &f->model->params, l);
    int C = cfg->dim, R = f->rows;
    const Dropout *drop = f->dropout;
    BlockMasks masks =
        drop ? block_masks(drop, l, cfg->heads, f->model->cur_T, C) : (BlockMasks){0};

    // x += Attn(norm1(x)) W_O^T + b_O
    norm_forward(cfg, b->ln, b->ln1_mean, b->ln1_rstd, b->x_in, p.ln1_w, p.ln1_b, R);
    f->project_qkv(f, l, b);
    queries_keys_forward(f->model, &p, b, R);
    int rows = f->attend(f, l, b);
    long rc = (long)rows * C;
    const ForwardHooks *hooks = f->hooks;
    if (hooks && hooks->attention_output) hooks->attention_output(hooks, l, b->att_out, rows);
    f->linear(f, l, PARAM_w_o, b->proj_out, b->att_out, rows);
    if (drop)
        dropout_forward(b->proj_out, b->proj_out, rc, 0, &masks.att_proj);
    if (hooks && hooks->sublayer_output)
        hooks->sublayer_output(hooks, l, SUBLAYER_ATTENTION, b->proj_out, rows);
    residual_forward(b->residual2, b->x_in, b->proj_out, rc);
    // x += act(norm2(x) W_fc^T + b_fc) W_proj^T + b_proj
    norm_forward(cfg, b->ln, b->ln2_mean, b->ln2_rstd, b->residual2, p.ln2_w, p.ln2_b, rows);
    f->linear(f, l, PARAM_fc_w, b->fc, b->ln, rows);
    mlp_activation_forward(cfg, b->fc_act, b->fc, rows);
    f->linear(f, l, PARAM_proj_w, b->proj_out, b->fc_act, rows);
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
        f->embed(f);
        if (f->dropout) {
            DropoutMask m =
                dropout_mask(f->dropout, DROPOUT_EMBEDDING, 0, (long)f->model->cur_T * C);
            dropout_forward(f->embedded, f->embedded, (long)rows * C, 0, &m);
        }
        if (hooks && hooks->stream) hooks->stream(hooks, 0, f->embedded, rows);
    }
    const float *x_out = f->embedded;
    for (int l = first; l < cfg->layers; l++) {
        BlockBuffers b = f->buffers(f, l);
        rows = block_forward(f, l, &b);
        x_out = b.x_out;
        if (hooks && hooks->stream) hooks->stream(hooks, l + 1, x_out, rows);
    }
    // logits (rows,V) = norm_f(x) . W_U^T, W_U wte (tied) or lm_head;
    // with a softcap, then cap * tanh(logits / cap)
    norm_forward(cfg, f->lnf, f->lnf_mean, f->lnf_rstd, x_out, p->lnf_w, p->lnf_b, rows);
    f->linear(f, -1, gpt_unembedding(cfg), f->logits, f->lnf, rows);
    if (cfg->softcap > 0)
        softcap_forward(f->logits, f->logits, cfg->softcap, (long)rows * cfg->vocab_size);
    return rows;
}

// ---- gpt_forward: the Forward over a batch of B x T positions, its
// activations saved for the backward

// The Forward's state: the model, whose products' workspace the batch's
// products use, the tokens (B,T) and what the caller asked for.
typedef struct {
    GPT *model;
    const int *tokens;
    const ForwardArgs *args;
} BatchForward;

static Products *batch_products(const Forward *f) {
    return &((const BatchForward *)f->state)->model->products;
}

// With RoPE no position is added here (wpe has no rows).
static float *position_embedding(const GPT *model, const ParameterTensors *tensors) {
    return model->config.pos == POS_LEARNED ? tensors->wpe : NULL;
}

// The embedding (B,T,C) of the tokens into out: wte[token] + wpe[t]; with
// the smear, smeared from the sum, which goes to scratch.ln.
static void batch_embed(const Forward *f) {
    const GPT *model = f->model;
    const GPTConfig *cfg = &model->config;
    const ParameterTensors *p = &model->params;
    int B = model->cur_B, T = model->cur_T, C = cfg->dim;
    float *sum = cfg->smear ? model->scratch.ln : f->embedded;
    embedding_forward(sum, ((const BatchForward *)f->state)->tokens, p->wte,
                      position_embedding(model, p), B, T, C);
    if (cfg->smear)
        smear_forward(f->embedded, sum, p->smear_gate, p->smear_lambda, B, T, C,
                      gpt_smear_width(cfg));
}

// Layer l's buffers over the last forward's B x T: its saved activations
// (their per-layer offsets written here alone, for the forward and the
// backward) and the scratch every layer reuses.
static BlockBuffers layer_buffers(const GPT *model, int l) {
    const Activations *a = &model->acts;
    const Scratch *s = &model->scratch;
    int NH = model->config.heads, qk_norm = model->config.qk_norm;
    long BT = (long)model->cur_B * model->cur_T, btc = BT * model->config.dim;
    long fc = (long)mlp_inputs(&model->config);
    float *q = a->q + l * btc, *k = a->k + l * btc;
    return (BlockBuffers){.x_in = l == 0 ? a->encoded : a->residual3 + (l - 1) * btc,
                          .ln = s->ln,
                          .ln1_mean = a->ln1_mean + l * BT,
                          .ln1_rstd = a->ln1_rstd + l * BT,
                          .q_raw = qk_norm ? a->q_raw + l * btc : q,
                          .k_raw = qk_norm ? a->k_raw + l * btc : k,
                          .q_rstd = qk_norm ? a->q_rstd + l * BT * NH : NULL,
                          .k_rstd = qk_norm ? a->k_rstd + l * BT * NH : NULL,
                          .q = q,
                          .k = k,
                          .v = a->v + l * btc,
                          .q_rows = (int)BT,
                          .q_positions = s->positions,
                          .positions = s->positions,
                          .att_out = a->att_out + l * btc,
                          .proj_out = s->proj_out,
                          .residual2 = a->residual2 + l * btc,
                          .ln2_mean = a->ln2_mean + l * BT,
                          .ln2_rstd = a->ln2_rstd + l * BT,
                          .fc = a->fc + l * fc * BT,
                          .fc_act = s->fc_act,
                          .x_out = a->residual3 + l * btc};
}

// The first block run reads the caller's stream when it is not block 0.
static BlockBuffers batch_buffers(const Forward *f, int l) {
    BlockBuffers b = layer_buffers(f->model, l);
    if (l > 0 && l == f->first_layer) b.x_in = ((const BatchForward *)f->state)->args->start_stream;
    return b;
}

static void batch_project_qkv(const Forward *f, int l, const BlockBuffers *b) {
    const GPT *model = f->model;
    float *qkv[3] = {b->q_raw, b->k_raw, b->v};
    const float *w_qkv[3], *b_qkv[3];
    for (int i = 0; i < 3; i++) {
        w_qkv[i] = param_slice(model, &model->params, qkv_weights[i], l);
        b_qkv[i] = param_bias(model, &model->params, qkv_weights[i], l);
    }
    int ic, oc;
    weight_widths(&model->config, qkv_weights[0], &ic, &oc);
    linear_forward_shared_input(batch_products(f), qkv, b->ln, w_qkv, b_qkv, 3, f->rows, ic, oc);
    if (model->config.value_embed) // v += layer l's value embedding of each row's token
        value_embed_forward(b->v, value_embed_table(model, &model->params, l),
                            ((const BatchForward *)f->state)->tokens, f->rows, model->config.dim);
}

// The fused attention, or the unfused one keeping the probabilities, as
// the caller asked (gpt.h: Attention probabilities); with the key offset,
// over the keys shifted within each window of T positions (in place: the
// saved k is what the attention read).
static int batch_attend(const Forward *f, int l, const BlockBuffers *b) {
    const GPT *model = f->model;
    const Activations *a = &model->acts;
    int B = model->cur_B, T = model->cur_T, C = model->config.dim, NH = model->config.heads;
    if (model->config.key_offset) key_offset_forward(b->k, B, T, C, NH);
    BlockMasks masks = f->dropout ? block_masks(f->dropout, l, NH, T, C) : (BlockMasks){0};
    const DropoutMask *drop = f->dropout ? &masks.att_probs : NULL;
    if (((const BatchForward *)f->state)->args->attention == ATTENTION_KEEP_PROBS) {
        float *probs = a->att_probs + (long)l * B * NH * T * T;
        attention_forward_dropout(&model->products, b->att_out, probs, b->q, b->k, b->v, B, T, T,
                                  C, NH, 1, drop);
        const ForwardHooks *hooks = f->hooks;
        if (hooks && hooks->attention_probs) { // gpt_forward: no dropout then
            hooks->attention_probs(hooks, l, probs, B, T);
            attention_values_forward(&model->products, b->att_out, probs, b->v, B, T, T, C, NH, 1);
        }
    } else
        attention_forward_fused(&model->products, b->att_out, a->att_stats + 2L * l * B * NH * T,
                                b->q, b->k, b->v, B, T, C, NH, drop);
    return f->rows;
}

static void batch_linear(const Forward *f, int l, int weight, float *out, const float *inp,
                         int rows) {
    const GPT *model = f->model;
    int ic, oc;
    weight_widths(&model->config, weight, &ic, &oc);
    linear_forward(batch_products(f), out, inp, param_slice(model, &model->params, weight, l),
                   param_bias(model, &model->params, weight, l), rows, ic, oc);
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
    BatchForward batch = {model, tokens, &args};
    Forward f = {.model = model,
                 .rows = BT,
                 .dropout = args.dropout,
                 .first_layer = first,
                 .embedded = a->encoded,
                 .lnf = a->lnf,
                 .lnf_mean = a->lnf_mean,
                 .lnf_rstd = a->lnf_rstd,
                 .logits = model->scratch.logits,
                 .embed = batch_embed,
                 .buffers = batch_buffers,
                 .project_qkv = batch_project_qkv,
                 .attend = batch_attend,
                 .linear = batch_linear,
                 .state = &batch,
                 .hooks = args.hooks};
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
        rope_backward(s->d_q, model->rope_table, b.q_positions, BT, C, NH);
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
