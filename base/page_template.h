// page_template.h: a page from its template (an HTML file of page/, built
// into the program) and what goes into it. Each @NAME@ in the template is
// replaced by its slot: a fixed text (the page's CSS, its JavaScript) or
// what a function writes (the data). The pages' HTML, CSS and JavaScript
// stay files of their own; the C side only fills them in.
#ifndef PAGE_TEMPLATE_H
#define PAGE_TEMPLATE_H

#include <stdio.h>

typedef struct {
    const char *name;                              // "DATA" for @DATA@
    const char *text;                              // written as it is; or NULL, and
    void (*write)(FILE *out, const void *context);  // this writes it
} TemplateSlot;

// The template to out, each @NAME@ that a slot names replaced by it (the
// writers given context); an @ that starts no slot's mark is written as it is.
void template_write(FILE *out, const char *template, const TemplateSlot *slots, int count,
                    const void *context);

#endif
