// export.c: bin/export, a checkpoint in another program's format: a GGUF
// file that llama.cpp runs (--to gguf), or a folder in Hugging Face's
// layout, what transformers loads (--to hf). docs/export.md says how to run
// each.
//
// A target holds a model in one of its architectures, each a block: GPT-2's
// (LayerNorm, learned positions, GELU) is llama.cpp's gpt2 and transformers'
// GPT2LMHeadModel; RMSNorm, RoPE and SwiGLU are llama.cpp's llama and
// transformers' LlamaForCausalLM, and with per-head query and key norms
// llama.cpp's qwen3. The checkpoint's config chooses one (choose_format);
// an option none of them expresses is refused by its bin/train flag, in one
// line, before anything is written. Each target tensor is one of ours, or
// several stacked along their rows (GPT-2's fused QKV), or half of one
// (SwiGLU's gate and up), its rows reordered where the target rotates other
// pairs of channels than ours, or transposed (GPT-2's Conv1D).
#include "export.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/files.h"
#include "../base/options.h"
#include "../base/util.h"
#include "../infer/checkpoint.h"

// ---- the targets

const char *const target_names[2] = {"gguf", "hf"};
static const char *const dtype_names[] = {"f32", "f16", "bf16"};
static const GgmlType dtype_types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};

// The record bin/train keeps in its run folder (train/run_folder.c).
#define TRAIN_RECORD ".written-by-bin-train"

// ---- options

#define NUM_OPTIONS 5

static void option_table(ExportOptions *o, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--ckpt", "FILE", OPT_STRING, &o->ckpt, "model checkpoint (.safetensors) from bin/train", 0, -1, 0},
        {"--to", "gguf|hf", OPT_STRING, &o->to,
         "gguf: one file for llama.cpp; hf: a folder in Hugging Face's layout", 0, -1, 0},
        {"--out", "PATH", OPT_STRING, &o->out, "the .gguf file, or the folder for hf", 0, -1, 0},
        {"--dtype", "f32|f16|bf16", OPT_STRING, &o->dtype,
         "gguf: the matrices' and embeddings' type (vectors stay f32); hf: f32 only", 0, -1, 0},
        {"--force", NULL, OPT_FLAG, &o->force, "overwrite what is at --out", 0, -1, 0},
    };
    memcpy(t, table, sizeof table);
}

static const char USAGE[] =
    "usage: bin/export --ckpt out/model.safetensors --to gguf|hf --out PATH [options]\n\n"
    "Writes a trained model in another program's format:\n"
    "  --to gguf: one GGUF file (version 3) that llama.cpp runs, the vocabulary\n"
    "    as its RWKV tokenizer (one token per character, no merges, nothing\n"
    "    added); greedy text as bin/sample's:\n"
    "      llama-completion -m model.gguf -no-cnv -c 64 --temp 0 -p 'ROMEO:'\n"
    "  --to hf: a folder with config.json, model.safetensors and tokenizer.json,\n"
    "    what transformers' AutoModelForCausalLM.from_pretrained loads.\n"
    "GPT-2's block is llama.cpp's and transformers' gpt2; --norm rmsnorm --pos rope\n"
    "--mlp swiglu is their llama, with --qk-norm llama.cpp's qwen3 (gguf only).\n"
    "A block neither target has (--mlp relu2, --softcap, ...) is refused.\n"
    "docs/export.md: the layouts, and how to run them.";

static ExportOptions default_options(void) {
    return (ExportOptions){.ckpt = "out/model.safetensors", .dtype = "f32"};
}

static ExportOptions parse_options(int argc, char **argv) {
    ExportOptions o = default_options(), defaults = default_options();
    Option table[NUM_OPTIONS], help_table[NUM_OPTIONS];
    option_table(&o, table);
    option_table(&defaults, help_table);
    options_parse_or_exit(table, help_table, NUM_OPTIONS, USAGE, NULL, 0, argc, argv);
    if (!o.to) usage_error("--to is needed: gguf or hf");
    if (!o.out) usage_error("--out is needed: the .gguf file, or the folder for hf");
    return o;
}

// ---- stale temporaries
//
// A write killed before its rename (kill -9, a power cut) leaves its
// temporary: "OUT.tmp.PID" beside OUT (a file, or --to hf's folder), and
// where the folder exchange is missing, "OUT.old.PID". Those of processes
// that are gone are removed before a new export of the same OUT.

static int process_alive(long pid) { return kill((pid_t)pid, 0) == 0 || errno == EPERM; }

static void remove_stale_temporaries(const char *out) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? out + (slash - dir) + 1 : out;
    if (slash == dir) dir[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    size_t base_len = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name, *suffix = name + base_len;
        if (strncmp(name, base, base_len) != 0) continue;
        int is_old = !strncmp(suffix, ".old.", 5);
        if (strncmp(suffix, ".tmp.", 5) != 0 && !is_old) continue;
        char *end;
        long pid = strtol(suffix + 5, &end, 10);
        if (*end || end == suffix + 5 || pid <= 0 || pid == (long)getpid() || process_alive(pid))
            continue;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (is_old && !file_exists(out)) continue; // the only copy of the old folder
        if (S_ISREG(st.st_mode)) unlink(path);
        else if (S_ISDIR(st.st_mode)) remove_hf_folder(path);
        if (lstat(path, &st) != 0)
            fprintf(stderr, "note: removed %s, left by an export that was cut short (process %ld "
                    "is gone)\n", path, pid);
    }
    closedir(d);
}

// ---- main: what --out may replace

// What a non-regular file is, for a message.
static const char *kind_of(mode_t mode) {
    return S_ISDIR(mode)    ? "a folder"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

// The first entry of folder dir that is not one of a --to hf folder's
// files, in *first; 0 when there is none.
static int foreign_in_hf_folder(const char *dir, char *first, size_t first_len) {
    DIR *d = opendir(dir);
    if (!d) die("%s: cannot read the folder: %s", dir, strerror(errno));
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || is_hf_file(e->d_name)) continue;
        snprintf(first, first_len, "%s", e->d_name);
        found = 1;
    }
    closedir(d);
    return found;
}

// Whether the folder `dir` (st) is the checkpoint's folder or one above it.
static int holds_checkpoint(const struct stat *dir, const char *ckpt) {
    char *real = realpath(ckpt, NULL);
    if (!real) return 0;
    int held = 0;
    for (char *slash; !held && (slash = strrchr(real, '/'));) {
        slash[slash == real] = '\0'; // "/a/b" -> "/a" -> "/"
        struct stat st;
        held = stat(real, &st) == 0 && st.st_dev == dir->st_dev && st.st_ino == dir->st_ino;
        if (slash == real) break;
    }
    free(real);
    return held;
}

// Whether path names a file bin/train lists in its run folder's record.
static int written_by_train(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : path;
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    FileList record = {0};
    char err[4400];
    int listed = written_record_read(dir, TRAIN_RECORD, &record, err, sizeof err) &&
                 file_list_find(&record, name) != NULL;
    file_list_free(&record);
    return listed;
}

// Refuse, before anything is read, an output that is there without
// --force, or that --force must not replace: of another kind than the
// target writes (a folder for a file, a FIFO, a device, a symbolic link),
// the checkpoint itself or a folder holding it, a training run's folder or
// one of its files, a folder with files bin/export does not write.
static void check_output(const ExportOptions *o, Target target) {
    struct stat st, link, in;
    if (lstat(o->out, &link) != 0) return;
    if (stat(o->out, &st) != 0)
        die("%s: is a symbolic link to nothing; --out takes a %s itself", o->out,
            target == TARGET_GGUF ? "file" : "folder");
    int is_dir = S_ISDIR(st.st_mode), is_file = S_ISREG(st.st_mode);
    const char *expected = target == TARGET_GGUF ? "--to gguf writes a regular file"
                                                 : "--to hf writes a folder";
    if (target == TARGET_GGUF && is_dir) die("%s: is a folder; --to gguf writes a file", o->out);
    if (target == TARGET_HF && is_file) die("%s: is a file; --to hf writes a folder", o->out);
    if (!is_dir && !is_file)
        die("%s: is %s; %s, and replaces nothing else", o->out, kind_of(st.st_mode), expected);
    if (S_ISLNK(link.st_mode))
        die("%s: is a symbolic link; %s and would replace the link, not what it points to", o->out,
            expected);
    if (stat(o->ckpt, &in) == 0) {
        if (is_file && st.st_dev == in.st_dev && st.st_ino == in.st_ino)
            die("%s: is the checkpoint --ckpt reads (%s); export to another file", o->out, o->ckpt);
        if (is_dir && holds_checkpoint(&st, o->ckpt))
            die("%s: holds the checkpoint --ckpt reads (%s); export to another folder", o->out,
                o->ckpt);
    }
    char first[512], record[4200];
    snprintf(record, sizeof record, "%s/%s", o->out, TRAIN_RECORD);
    if (is_file && written_by_train(o->out))
        die("%s: is a file of a training run (its folder's %s lists it); export to another file",
            o->out, TRAIN_RECORD);
    if (is_dir && file_exists(record))
        die("%s: is a training run's folder (it holds %s); export to another folder", o->out,
            TRAIN_RECORD);
    if (is_dir && foreign_in_hf_folder(o->out, first, sizeof first))
        die("%s: holds %s, which bin/export does not write; --to hf replaces only a folder of its "
            "own", o->out, first);
    if (!o->force) die("%s: exists (--force overwrites it)", o->out);
}

int main(int argc, char **argv) {
    ExportOptions o = parse_options(argc, argv);
    Target target = (Target)option_choice("--to", o.to, target_names, 2);
    int dtype = option_choice("--dtype", o.dtype, dtype_names, 3);
    if (target == TARGET_HF && dtype != 0)
        usage_error("--dtype %s: --to hf writes f32 (model.safetensors as our checkpoints)", o.dtype);
    // "hf/" is the folder "hf": its temporary is "hf.tmp.PID" beside it, not in it
    char out[4096];
    snprintf(out, sizeof out, "%s", o.out);
    for (size_t len = strlen(out); len > 1 && out[len - 1] == '/'; len--) out[len - 1] = '\0';
    o.out = out;
    check_output(&o, target);
    check_config_keys(o.ckpt, target);
    GPT model;
    Vocab vocab;
    char err[2048];
    if (!gpt_load(o.ckpt, &model, &vocab, err, sizeof err)) die("%s", err);
    const Format *format = choose_format(o.ckpt, &model.config, target);
    warn_unused_tensors(o.ckpt, &model.config);
    size_t non_finite = 0;
    for (size_t i = 0; i < model.num_params; i++) non_finite += !isfinite(model.params_memory[i]);
    if (non_finite)
        fprintf(stderr, "warning: %s has %zu non-finite (NaN or Inf) weights; exported as they are\n",
                o.ckpt, non_finite);
    remove_stale_temporaries(o.out);
    if (target == TARGET_GGUF) write_gguf(&o, &model, &vocab, format, dtype_types[dtype]);
    else write_hf(&o, &model, &vocab, format);
    const GPTConfig *c = &model.config;
    printf("%s: %s, %s, %d layers, %d heads, %d wide, context %d, %d characters, %s\n", o.out,
           target == TARGET_GGUF ? "GGUF" : "Hugging Face's layout", format->title, c->layers,
           c->heads, c->dim, c->context, c->vocab_size, o.dtype);
    gpt_free(&model);
    vocab_free(&vocab);
    return 0;
}

