// page_template.c: template_write (page_template.h).
#include "page_template.h"

#include <string.h>

// The slot whose mark starts at `at` ("@NAME@"), or NULL.
static const TemplateSlot *slot_at(const char *at, const TemplateSlot *slots, int count) {
    for (int i = 0; i < count; i++) {
        size_t len = strlen(slots[i].name);
        if (!strncmp(at + 1, slots[i].name, len) && at[1 + len] == '@') return &slots[i];
    }
    return NULL;
}

void template_write(FILE *out, const char *template, const TemplateSlot *slots, int count,
                    const void *context) {
    const char *at = template;
    for (const char *mark; (mark = strchr(at, '@'));) {
        const TemplateSlot *slot = slot_at(mark, slots, count);
        fwrite(at, 1, (size_t)(mark - at) + (slot ? 0 : 1), out);
        at = mark + 1;
        if (!slot) continue;
        if (slot->text) fputs(slot->text, out);
        else slot->write(out, context);
        at = mark + strlen(slot->name) + 2;
    }
    fputs(at, out);
}
