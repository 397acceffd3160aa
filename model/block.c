// block.c: the block's choices (gpt.h's GPT_BLOCK_CHOICES): their rows as
// data, and what every program asks of them.
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gpt.h"
#include "../base/options.h"

const BlockChoice gpt_block_choices[NUM_BLOCK_CHOICES] = {
#define GPT_CHOICE_ROW(field, type, kind, flag, meta, names, fallback, low, low_open, high,     \
                       range, needs, help, gguf, hf)                                          \
    {#field, flag, meta, CHOICE_##kind, offsetof(GPTConfig, field), names, fallback, low,            \
     CHOICE_##low_open, high, range, needs, help, {gguf, hf}}, /* needs: two values */
    GPT_BLOCK_CHOICES(GPT_CHOICE_ROW)
#undef GPT_CHOICE_ROW
};

// A NAMED or FLAG choice is an int (an enum is one: its values are small
// and not negative), a NUMBER a float.
float gpt_choice_get(const GPTConfig *cfg, int i) {
    const BlockChoice *c = &gpt_block_choices[i];
    const char *field = (const char *)cfg + c->offset;
    if (c->kind == CHOICE_NUMBER) return *(const float *)field;
    return (float)*(const int *)field;
}

void gpt_choice_set(GPTConfig *cfg, int i, float value) {
    const BlockChoice *c = &gpt_block_choices[i];
    char *field = (char *)cfg + c->offset;
    if (c->kind == CHOICE_NUMBER) *(float *)field = value;
    else *(int *)field = (int)value;
}

int gpt_choice_in_use(const GPTConfig *cfg, int i) {
    const BlockChoice *c = &gpt_block_choices[i];
    return c->needs < 0 || gpt_choice_get(cfg, c->needs) == (float)c->needs_value;
}

int gpt_choice_valid(int i, float value) {
    const BlockChoice *c = &gpt_block_choices[i];
    switch (c->kind) {
    case CHOICE_NAMED: {
        char name[64];
        return value >= 0 && value < 64 && value == (float)(int)value &&
               *choice_name(c->names, (int)value, name, sizeof name);
    }
    case CHOICE_FLAG: return value == 0 || value == 1;
    case CHOICE_NUMBER:
        return (c->low_open == CHOICE_OPEN ? value > c->low : value >= c->low) && value <= c->high;
    }
    return 0;
}

void gpt_choice_text(const GPTConfig *cfg, int i, char *out, size_t len) {
    const BlockChoice *c = &gpt_block_choices[i];
    float value = gpt_choice_get(cfg, i);
    if (c->kind == CHOICE_NAMED) choice_name(c->names, (int)value, out, len);
    else if (c->kind == CHOICE_FLAG) snprintf(out, len, "%s", value != 0 ? "on" : "off");
    else snprintf(out, len, "%g", (double)value);
}

void gpt_choice_flags(const GPTConfig *cfg, int i, char *out, size_t len) {
    const BlockChoice *c = &gpt_block_choices[i];
    char value[64] = "";
    if (c->kind != CHOICE_FLAG) gpt_choice_text(cfg, i, value, sizeof value);
    if (c->kind == CHOICE_FLAG && gpt_choice_get(cfg, i) == 0) snprintf(out, len, "no %s", c->flag);
    else snprintf(out, len, "%s%s%s", c->flag, *value ? " " : "", value);
}

void gpt_choice_needs(const GPTConfig *cfg, int i, char *out, size_t len) {
    const BlockChoice *c = &gpt_block_choices[i];
    GPTConfig needed = *cfg;
    gpt_choice_set(&needed, c->needs, (float)c->needs_value);
    gpt_choice_flags(&needed, c->needs, out, len);
}

GPTConfig gpt_block_defaults(GPTConfig shape) {
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++)
        gpt_choice_set(&shape, i, gpt_block_choices[i].fallback);
    return shape;
}

void gpt_block_clear_unused(GPTConfig *cfg) {
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++)
        if (!gpt_choice_in_use(cfg, i)) gpt_choice_set(cfg, i, 0);
}

void gpt_block_describe(const GPTConfig *cfg, int all, char *out, size_t len) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < NUM_BLOCK_CHOICES && used < len; i++) {
        const BlockChoice *c = &gpt_block_choices[i];
        float value = gpt_choice_get(cfg, i);
        if (!gpt_choice_in_use(cfg, i)) continue;
        if (c->kind == CHOICE_FLAG ? value == 0 : !all && value == c->fallback) continue;
        char flags[96];
        gpt_choice_flags(cfg, i, flags, sizeof flags);
        used += (size_t)snprintf(out + used, len - used, "%s%s", used ? " " : "", flags);
    }
}

int gpt_config_equal(const GPTConfig *a, const GPTConfig *b) {
    if (a->vocab_size != b->vocab_size || a->context != b->context || a->layers != b->layers ||
        a->heads != b->heads || a->dim != b->dim)
        return 0;
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++)
        if (gpt_choice_get(a, i) != gpt_choice_get(b, i)) return 0;
    return 1;
}
