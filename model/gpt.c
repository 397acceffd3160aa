// gpt.c: the GPT's parameters (from the table), initialisation and buffers.
#include "gpt.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "../kernels/matmul.h"
#include "../kernels/parallel.h"
#include "layouts.h"
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
    // a case per row, each computing only its own shape (the KV cache's
    // single steps ask a few dozen times a token)
    switch (i) {
#define GPT_PARAM_SHAPE(view, name, r, c, ...)                                                     \
    case PARAM_##view: *rows = (r), *cols = (c); return;
        GPT_PARAMETER_TENSORS(GPT_PARAM_SHAPE)
#undef GPT_PARAM_SHAPE
    }
    die("param_shape: tensor %d of %d", i, NUM_PARAM_TENSORS);
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
    switch (i) {
#define GPT_PARAM_TENSOR(view, ...)                                                                \
    case PARAM_##view: return views->view;
        GPT_PARAMETER_TENSORS(GPT_PARAM_TENSOR)
#undef GPT_PARAM_TENSOR
    }
    die("param_tensor: tensor %d of %d", i, NUM_PARAM_TENSORS);
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
double mlp_inputs(const GPTConfig *cfg) {
    long rows, cols;
    param_shape(cfg, PARAM_fc_w, &rows, &cols);
    return (double)rows;
}

// The saved activations for a batch of B x T: a training model's keep the
// attention's log-sum-exps (L,B,NH,T,2: attention.h), an inference model's its
// probabilities (L,B,NH,T,T) (gpt.h: Attention probabilities).
double activation_layout(const GPTConfig *cfg, Activations *a, int B, int T, int training,
                         float *memory) {
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
// NaN, which the gradient checks catch (life_ends: transformer.c).
#ifdef GPT_CHECK_BUFFER_LIVES
enum { SHARE_BACKWARD_BUFFERS = 0 };
#else
enum { SHARE_BACKWARD_BUFFERS = 1 };
#endif


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
