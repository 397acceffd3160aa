// attn_folder.h: the output folder bin/attn writes into, and the record
// of what it wrote there (base/files.h), so that a user's files are never
// replaced unasked.
#ifndef ATTN_FOLDER_H
#define ATTN_FOLDER_H

#include "../base/files.h"
#include "attn_options.h"

// --out as this run found it: the record of the runs before (what bin/attn
// wrote there) and the files there before this run wrote any.
typedef struct {
    const char *out;
    FileList last, before;
} OutFolder;

// --out must be new, empty, or hold only what bin/attn wrote there, as it
// left it (its record), unless --force: a user's files are never replaced
// unasked.
void check_out_folder(const AttnOptions *o, OutFolder *folder);
void record_out_folder_or_die(const OutFolder *folder, int done);
// From here on a run that fails records what it wrote in folder, so that
// the next may write there again.
void record_out_folder_on_failure(const OutFolder *folder);

#endif
