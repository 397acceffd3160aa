#include "fixtures.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../infer/checkpoint.h"
#include "../optim/adamw.h"
#include "../train/train_state.h"
#include "check.h"

// ---- folders and paths

// Every folder make_temp_dir made, removed when the process that made them
// exits (not a forked child), unless GPT_TEST_KEEP is set (to look at a
// failed test's files).
static char **temp_dirs;
static int temp_dir_count;
static pid_t temp_dir_owner;

static void remove_temp_dirs(void) {
    if (getpid() != temp_dir_owner) return;
    for (int i = 0; i < temp_dir_count; i++) {
        if (!getenv("GPT_TEST_KEEP")) remove_tree(temp_dirs[i]);
        free(temp_dirs[i]);
    }
    free(temp_dirs);
    temp_dirs = NULL;
    temp_dir_count = 0;
}

const char *make_temp_dir(void) {
    if (!temp_dirs) {
        temp_dir_owner = getpid();
        atexit(remove_temp_dirs);
    }
    char *p = xmalloc(64);
    snprintf(p, 64, "/tmp/gpt_test_XXXXXX");
    if (!mkdtemp(p)) {
        perror("mkdtemp");
        exit(2);
    }
    char **grown = realloc(temp_dirs, (size_t)(temp_dir_count + 1) * sizeof *temp_dirs);
    if (!grown) {
        perror("realloc");
        exit(2);
    }
    temp_dirs = grown;
    temp_dirs[temp_dir_count++] = p;
    return p;
}

void remove_tree(const char *dir) {
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    run_command(command, NULL);
}

const char *path_in(const char *dir, const char *name) {
    static char paths[16][1024];
    static int next;
    char *p = paths[next++ % 16];
    snprintf(p, 1024, "%.500s/%.500s", dir, name);
    return p;
}

const char *checkout_path(const char *relative) {
    static char paths[4][512];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, 512, "%s%s", file_exists(relative) ? "" : "../", relative);
    return path;
}

const char *keep_path(const char *path) {
    static char kept[64][1024];
    static int next;
    char *p = kept[next++ % 64];
    snprintf(p, 1024, "%s", path);
    return p;
}

int count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

// ---- files

unsigned char *read_file_bytes(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = xmalloc((size_t)n + 1);
    size_t got = fread(bytes, 1, (size_t)n, f);
    bytes[got] = '\0';
    fclose(f);
    if (len) *len = got;
    return bytes;
}

char *read_text_file(const char *path) { return (char *)read_file_bytes(path, NULL); }

void write_file_bytes(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len) die("%s: %s", path, strerror(errno));
    fclose(f);
}

void copy_file(const char *from, const char *to) {
    size_t len = 0;
    unsigned char *bytes = read_file_bytes(from, &len);
    if (!bytes) die("%s: cannot read", from);
    write_file_bytes(to, bytes, len);
    free(bytes);
}

long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

int same_bytes(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    unsigned char *x = read_file_bytes(a, &la), *y = read_file_bytes(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

// ---- running the programs

int run_command(const char *command, const char *capture_path) {
    char full[8192];
    snprintf(full, sizeof full, "%s >%s 2>&1", command, capture_path ? capture_path : "/dev/null");
    int status = system(full);
    if (status == -1 || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

int split_words(char *line, char *argv[128]) {
    int argc = 0;
    char *save = NULL;
    for (char *word = strtok_r(line, " ", &save); word && argc < 127;
         word = strtok_r(NULL, " ", &save))
        argv[argc++] = word;
    argv[argc] = NULL;
    return argc;
}

pid_t fork_into(const char *capture) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(capture ? capture : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
    }
    return pid;
}

pid_t spawn(const char *capture, const SpawnOptions *opts, const char *fmt, ...) {
    char line[8192];
    va_list args;
    va_start(args, fmt);
    vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    char *argv[128];
    split_words(line, argv);
    pid_t pid = fork_into(capture);
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (opts && opts->env) putenv((char *)opts->env);
        if (opts && opts->file_size_limit > 0) {
            signal(SIGXFSZ, SIG_IGN); // the write fails with EFBIG instead
            struct rlimit limit = {(rlim_t)opts->file_size_limit, (rlim_t)opts->file_size_limit};
            setrlimit(RLIMIT_FSIZE, &limit);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int wait_exit(pid_t pid) {
    for (long waited_ms = 0;; waited_ms += 10) {
        int status;
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
        if (done < 0) return -1;
        if (waited_ms > WAIT_SECONDS * 1000L) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        sleep_ms(10);
    }
}

int wait_for_text(pid_t pid, const char *path, const char *text) {
    for (long waited_ms = 0; waited_ms < WAIT_SECONDS * 1000L; waited_ms += 10) {
        char *content = read_text_file(path);
        int found = content && strstr(content, text);
        free(content);
        if (found) return 1;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            // exited before printing it: report through a later wait_exit
            fprintf(stdout, "    process exited early (status %d)\n", status);
            return 0;
        }
        sleep_ms(10);
    }
    return 0;
}

char *output_of(const char *capture) {
    char *text = read_text_file(capture);
    return text ? text : calloc(1, 1);
}

// ---- corpora and runs of bin/train

unsigned char *corpus_text(size_t bytes) {
    size_t len = 0;
    unsigned char *text = read_file_bytes("data/tinyshakespeare.txt", &len);
    if (text && len >= bytes) return text;
    free(text);
    text = xmalloc(bytes + 1);
    Rng rng;
    rng_seed(&rng, 7);
    const char *words[] = {"the ", "king ", "and ", "queen ", "said\n", "to ", "thee, "};
    for (len = 0; len < bytes;) {
        const char *w = words[rng_below(&rng, 7)];
        for (; *w && len < bytes; w++) text[len++] = (unsigned char)*w;
    }
    text[bytes] = '\0';
    return text;
}

const char *make_corpus(const char *dir, const char *name, size_t bytes) {
    const char *path = path_in(dir, name);
    unsigned char *text = corpus_text(bytes);
    write_file_bytes(path, text, bytes);
    free(text);
    return path;
}

// The bytes after a safetensors file's header (its tensors): the header
// holds the run's flags, which name the folder.
static unsigned char *tensor_bytes(const char *path, size_t *len) {
    size_t n;
    unsigned char *bytes = read_file_bytes(path, &n);
    if (!bytes || n < 8) {
        free(bytes);
        return NULL;
    }
    unsigned long long header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | bytes[i];
    if (8 + header > n) {
        free(bytes);
        return NULL;
    }
    *len = n - 8 - header;
    memmove(bytes, bytes + 8 + header, *len);
    return bytes;
}

int same_tensors(const char *dir_a, const char *dir_b, const char *file) {
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s/%s", dir_a, file);
    snprintf(pb, sizeof pb, "%s/%s", dir_b, file);
    size_t la = 0, lb = 0;
    unsigned char *a = tensor_bytes(pa, &la), *b = tensor_bytes(pb, &lb);
    int same = a && b && la == lb && la > 0 && !memcmp(a, b, la);
    free(a);
    free(b);
    return same;
}

void train_on_1_and_2_threads(const char *flags, char run_1[512], char run_2[512]) {
    char *runs[2] = {run_1, run_2}, cmd[1024];
    for (int threads = 1; threads <= 2; threads++) {
        snprintf(runs[threads - 1], 512, "%s/run", make_temp_dir());
        snprintf(cmd, sizeof cmd, "bin/train %s --threads %d --out %s", flags, threads,
                 runs[threads - 1]);
        CHECK(run_command(cmd, NULL) == 0);
    }
}

char *log_columns(const char *run, int columns) {
    char *text = read_text_file(path_in(run, "log.csv"));
    if (!text) return NULL;
    char *out = calloc(strlen(text) + 1, 1), *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int commas = 0;
        size_t n = 0;
        while (line[n] && commas < columns) commas += line[n++] == ',';
        strncat(out, line, n);
        strcat(out, "\n");
    }
    free(text);
    return out;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

long checkpoint_step_of(const char *dir, int *finite, int *from_prev) {
    GPT model;
    Vocab vocab;
    char err[1024];
    if (!gpt_load(path_in(dir, "model.safetensors"), &model, &vocab, err, sizeof err)) return -1;
    if (finite) *finite = all_finite(model.params_memory, model.num_params);
    long step = -1;
    const char *names[] = {"optimizer.safetensors", "optimizer.prev.safetensors"};
    float *last = xmalloc(model.num_params * sizeof(float));
    for (int i = 0; i < 2 && step < 0; i++) {
        AdamW opt;
        adamw_init(&opt, model.num_params);
        uint64_t rng_state, saved_hash;
        char *options = NULL;
        BestModel best;
        int has_last = 0;
        // the state belongs with the model file, or holds the weights it
        // continues from (the model file being the run's best)
        if (train_state_load_with_muon(path_in(dir, names[i]), &opt, NULL, NULL, &rng_state,
                                       &saved_hash, &options, &best, last, &has_last, err,
                                       sizeof err) &&
            saved_hash == params_hash(has_last ? last : model.params_memory, model.num_params)) {
            step = opt.step;
            if (from_prev) *from_prev = i == 1;
        }
        free(options);
        adamw_free(&opt);
    }
    free(last);
    gpt_free(&model);
    vocab_free(&vocab);
    return step;
}

long checkpoint_step(const char *dir, int *finite) { return checkpoint_step_of(dir, finite, NULL); }

int load_run_weights(const char *dir, GPT *model, Vocab *vocab) {
    char err[1024];
    if (!gpt_load(path_in(dir, "model.safetensors"), model, vocab, err, sizeof err)) return 0;
    AdamW opt;
    adamw_init(&opt, model->num_params);
    uint64_t rng_state, saved_hash;
    char *options = NULL;
    BestModel best;
    int has_last = 0;
    float *last = xmalloc(model->num_params * sizeof(float));
    if (train_state_load_with_muon(path_in(dir, "optimizer.safetensors"), &opt, NULL, NULL,
                                   &rng_state, &saved_hash, &options, &best, last, &has_last, err,
                                   sizeof err) &&
        has_last)
        memcpy(model->params_memory, last, model->num_params * sizeof(float));
    free(last);
    free(options);
    adamw_free(&opt);
    return 1;
}

// ---- models

const GPTConfig tiny_config = {.vocab_size = 7, .context = 6, .layers = 2, .heads = 2, .dim = 8};

void build_model(GPT *model, const GPTConfig *cfg, RandomWeights weights) {
    gpt_build(model, cfg);
    gpt_init_params(model, weights.init_seed);
    if (weights.spread == 0) return;
    Rng rng;
    rng_seed(&rng, weights.spread_seed);
    for (size_t i = 0; i < model->num_params; i++)
        model->params_memory[i] += weights.spread * rng_normal(&rng);
}

void build_text_model(GPT *model, Vocab *vocab, const char *text, int context,
                      RandomWeights weights) {
    char err[512];
    CHECK(vocab_build(vocab, (const unsigned char *)text, strlen(text), err, sizeof err));
    GPTConfig cfg = {.vocab_size = vocab->size, .context = context, .layers = 2, .heads = 2, .dim = 16};
    build_model(model, &cfg, weights);
}

const char *save_text_model(const char *text, int context, RandomWeights weights) {
    static char paths[4][256];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, 256, "%s/model.safetensors", make_temp_dir());
    GPT model;
    Vocab vocab;
    char err[512];
    build_text_model(&model, &vocab, text, context, weights);
    CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    return path;
}

GPT new_model(const GPTConfig *cfg, int B_max, int T_max, uint64_t seed) {
    GPT model;
    build_model(&model, cfg, (RandomWeights){seed, 0, 0});
    gpt_alloc_training(&model, B_max, T_max);
    return model;
}

void random_tokens(Rng *rng, int *tokens, int n, int V) {
    for (int i = 0; i < n; i++) tokens[i] = (int)rng_below(rng, (uint64_t)V);
}

double qk_score_reference(const GPT *model, int layer, int head, const float *x_a,
                          const float *x_b) {
    int C = model->config.dim, hs = C / model->config.heads;
    const float *wq = model->params.w_q + (size_t)layer * C * C;
    const float *wk = model->params.w_k + (size_t)layer * C * C;
    double sum = 0;
    for (int d = head * hs; d < (head + 1) * hs; d++) {
        double q = 0, k = 0;
        for (int c = 0; c < C; c++) {
            q += (double)wq[d * C + c] * x_a[c];
            k += (double)wk[d * C + c] * x_b[c];
        }
        sum += q * k;
    }
    return sum;
}

// ---- gradient checks: one op

float *random_normal(Rng *rng, long n, float scale, float offset) {
    float *x = xmalloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) x[i] = offset + scale * rng_normal(rng);
    return x;
}

float *zeros(long n) { return xcalloc((size_t)n, sizeof(float)); }

float *gradient_buffer(long n) {
    float *g = xmalloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) g[i] = GRAD_START;
    return g;
}

double weighted_sum(const float *out, const float *r, long n) {
    double sum = 0.0;
    for (long i = 0; i < n; i++) sum += (double)out[i] * r[i];
    return sum;
}

double central_difference(float *x, long i, LossFn loss, void *ctx) {
    float saved = x[i];
    float plus = saved + GRAD_STEP, minus = saved - GRAD_STEP;
    x[i] = plus;
    double loss_plus = loss(ctx);
    x[i] = minus;
    double loss_minus = loss(ctx);
    x[i] = saved;
    return (loss_plus - loss_minus) / ((double)plus - (double)minus);
}

void check_gradient(const char *name, float *x, const float *analytic, long n, long samples,
                    LossFn loss, void *ctx, Rng *rng) {
    int every = samples <= 0 || n <= samples;
    long count = every ? n : samples;
    for (long s = 0; s < count; s++) {
        long i = every ? s : (long)rng_below(rng, (uint64_t)n);
        double numeric = central_difference(x, i, loss, ctx);
        double a = (double)analytic[i] - GRAD_START;
        double tol = GRAD_ATOL + GRAD_RTOL * fmax(fabs(a), fabs(numeric));
        CHECK_MSG(fabs(a - numeric) <= tol, "%s[%ld]: analytic %.7g, numeric %.7g (tol %.3g)", name,
                  i, a, numeric, tol);
    }
}

// ---- gradient checks: the whole model

void rescale_params(GPT *model, Rng *rng) {
    float *t = model->params_memory;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        ParamInit init = param_specs[i].init;
        for (size_t j = 0; j < model->param_sizes[i]; j++) {
            float z = rng_normal(rng);
            t[j] = init == INIT_ONE ? 1.0f + 0.2f * z : param_is_decayed(i) ? 0.3f * z : 0.1f * z;
        }
        t += model->param_sizes[i];
    }
}

double model_loss(const ModelCase *m) {
    gpt_forward(m->model, m->tokens, m->B, m->T,
                (ForwardArgs){.targets = m->targets, .attention = ATTENTION_FUSED,
                              .dropout = m->dropout});
    double sum = 0;
    for (int i = 0; i < m->B * m->T; i++) sum += m->model->acts.losses[i];
    return sum / (m->B * m->T);
}

void check_param_gradient(const ModelCase *m, int tensor, float *param, float analytic,
                          size_t index) {
    float saved = *param;
    float plus = saved + MODEL_STEP, minus = saved - MODEL_STEP;
    *param = plus;
    double loss_plus = model_loss(m);
    *param = minus;
    double loss_minus = model_loss(m);
    *param = saved;
    double numeric = (loss_plus - loss_minus) / ((double)plus - (double)minus);
    double tol = MODEL_ATOL + MODEL_RTOL * fmax(fabs(analytic), fabs(numeric));
    CHECK_MSG(fabs(analytic - numeric) <= tol, "d_%s[%zu]: analytic %.7g, numeric %.7g (tol %.3g)",
              param_specs[tensor].name, index, analytic, numeric, tol);
}

// ---- the explorer in headless Chromium

int page_fetches_nothing(const char *page) {
    return strstr(page, "Content-Security-Policy") && strstr(page, "default-src 'none'") &&
           !strstr(page, "http:") && !strstr(page, "https:") && !strstr(page, "src=") &&
           !strstr(page, "fetch(") && !strstr(page, "XMLHttpRequest") && !strstr(page, "@import");
}

const char *find_chromium(void) {
    static const char *const candidates[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                                             "/usr/bin/google-chrome"};
    for (int i = 0; i < 3; i++)
        if (access(candidates[i], X_OK) == 0) return candidates[i];
    return NULL;
}

char *chromium_dom(const char *chromium, const char *dir, const char *page) {
    // the page's console goes to the log with the DOM: a request the policy
    // blocked shows there ("violates the following Content Security Policy")
    char cmd[4096], log[600];
    const char *sandbox = geteuid() == 0 ? "--no-sandbox" : "";
    snprintf(log, sizeof log, "%s/dom.html", dir);
    snprintf(cmd, sizeof cmd, "%s --headless %s --disable-gpu --user-data-dir=%s/profile "
             "--enable-logging=stderr --v=0 --virtual-time-budget=3000 "
             "--dump-dom 'file://%s/%s'", chromium, sandbox, dir, dir, page);
    int status = run_command(cmd, log);
    CHECK_MSG(status == 0, "chromium exited %d", status);
    char *dom = read_text_file(log);
    CHECK_MSG(dom, "no DOM from chromium");
    return dom;
}


void reference_layernorm(double *out, const double *x, const float *w, const float *b, int C) {
    double mean = 0, var = 0;
    for (int c = 0; c < C; c++) mean += x[c];
    mean /= C;
    for (int c = 0; c < C; c++) var += (x[c] - mean) * (x[c] - mean);
    double r = 1.0 / sqrt(var / C + 1e-5);
    for (int c = 0; c < C; c++) out[c] = (x[c] - mean) * r * w[c] + b[c];
}

void reference_linear(double *out, const double *in, const float *w, const float *b, int ic, int oc) {
    for (int o = 0; o < oc; o++) {
        double sum = b ? b[o] : 0;
        for (int i = 0; i < ic; i++) sum += (double)w[(long)o * ic + i] * in[i];
        out[o] = sum;
    }
}

double reference_loss(const double *logits, int V, int target) {
    double top = logits[0], sum = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > top) top = logits[v];
    for (int v = 0; v < V; v++) sum += exp(logits[v] - top);
    return log(sum) + top - logits[target];
}

int csv_fields(char *line, char **fields, int max) {
    int n = 0;
    char *r = line, *w = line;
    while (n < max) {
        fields[n++] = w;
        if (*r == '"') {
            r++;
            while (*r && !(*r == '"' && r[1] != '"')) {
                if (*r == '"') r++;
                *w++ = *r++;
            }
            if (*r == '"') r++;
        } else {
            while (*r && *r != ',') *w++ = *r++;
        }
        int more = *r == ',';
        *w++ = '\0';
        if (!more) break;
        r++;
    }
    return n;
}

#if defined(__GLIBC__) && defined(_GNU_SOURCE)
static void exit_at_once(int status, void *unused) {
    (void)unused;
    fflush(stdout);
    _exit(status);
}
#endif

void exit_before_leak_check(void) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    on_exit(exit_at_once, NULL);
#endif
}
