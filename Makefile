# Build: `make` (bin/train), `make test`, `make bench`.
# Portable build (no -march=native, e.g. to copy binaries to another CPU):
#   make PORTABLE=1
# Cross build, portable, for the CPU of a cross compiler CROSS-gcc, its
# objects and programs in build-<CROSS>/obj and build-<CROSS>/bin (bin/ is
# left to the native build); `make test-arm64` runs the ARM64 one's tests
# under emulation:
#   make CROSS=aarch64-linux-gnu-
# Without OpenMP (every step on one thread, and the trainer says so):
#   make OPENMP=0
# Only POSIX declarations, to find calls that only Linux has:
#   make POSIX=1
# On macOS, the Darwin branch below. What is tested where: docs/platforms.md.

# ---- macOS (Darwin). We have no Mac: this branch has never run. Apple's
# clang; OpenMP from Homebrew's libomp, which is keg-only (its own include/
# and lib/ under `brew --prefix libomp`), or, without it, none (as with
# OPENMP=0, and a note here); cJSON from Homebrew's cjson; stb's image headers
# from STB_INCLUDE/stb/, the PNG writer and the tests' reader (Homebrew has no
# stb: docs/platforms.md).
UNAME_S := $(shell uname -s)
ifeq ($(UNAME_S),Darwin)
ifeq ($(origin CC),default)
CC := clang
endif
HOMEBREW ?= $(shell brew --prefix 2>/dev/null)
LIBOMP ?= $(shell brew --prefix libomp 2>/dev/null)
STB_INCLUDE ?= $(HOMEBREW)/include
PLATFORM_FLAGS = -I$(HOMEBREW)/include -I$(STB_INCLUDE)
PLATFORM_LIBS = -L$(HOMEBREW)/lib
ifneq ($(OPENMP),0)
ifneq ($(wildcard $(LIBOMP)/include/omp.h),)
OPENMP_FLAGS ?= -Xpreprocessor -fopenmp -I$(LIBOMP)/include
OPENMP_LIBS ?= -L$(LIBOMP)/lib -lomp
else
$(info note: no libomp found (brew install libomp): building without OpenMP, every step on one thread)
OPENMP := 0
endif
endif
endif

CC ?= gcc
ifeq ($(CC),cc)
CC := gcc
endif
BUILD = build
BIN = bin
ifdef CROSS
CC := $(CROSS)gcc
PORTABLE := 1
BUILD := build-$(CROSS:%-=%)/obj
BIN := build-$(CROSS:%-=%)/bin
endif
ifdef PORTABLE
ARCH_FLAGS ?= -O3
else
# -march=native where the compiler takes it, else -mcpu=native (what older
# clang for ARM64 takes instead), else neither.
NATIVE_FLAG := $(shell for f in -march=native -mcpu=native; do \
                   $(CC) -Werror $$f -x c -c /dev/null -o /dev/null 2>/dev/null && echo $$f && break; done)
ARCH_FLAGS ?= -O3 $(NATIVE_FLAG)
endif
CFLAGS ?= $(ARCH_FLAGS)
# The C library's declarations: glibc's all (_GNU_SOURCE), or with POSIX=1
# only POSIX.1-2008's with its XSI option, what macOS and the BSDs also
# declare: a build that finds the Linux-only calls (docs/platforms.md).
ifdef POSIX
FEATURES = -D_XOPEN_SOURCE=700
else
FEATURES = -D_GNU_SOURCE
endif
# OpenMP: -fopenmp; with OPENMP=0 none, every loop on one thread (omp.h's
# six calls answered by base/no_openmp/omp.h, the pragmas ignored, and with
# them a helper called only in a pragma's clause, unused then).
ifeq ($(OPENMP),0)
OPENMP_FLAGS = -Ibase/no_openmp -Wno-unknown-pragmas -Wno-unused-function
OPENMP_LIBS =
else
OPENMP_FLAGS ?= -fopenmp
endif
# -fno-math-errno: no math function's errno is read, and without it GCC will
# not vectorize a loop that calls sqrtf (AdamW's update ran scalar).
CFLAGS += -std=c11 $(FEATURES) -ffp-contract=fast -fno-math-errno -Wall -Wextra $(OPENMP_FLAGS) -MMD -MP
ifdef PLATFORM_FLAGS
CFLAGS += $(PLATFORM_FLAGS)
endif
# Every a * b + c a fused multiply-add, wherever it stands. GCC tuned for AMD
# Zen 1-3 (-march=native there) leaves a loop-carried sum of 256-bit vectors
# as a multiply and an add (avoid-fma-max-bits=256), but fuses the same sum
# in a loop with several of them: two paths that must give the same bits
# (a product tile of one row, the sampler's batched attention) then rounded
# differently on Zen 3. Clang has no such heuristic, and no such flag.
# (Asked once: CFLAGS is a deferred variable, so a $(shell) in it would run
# at every compile.)
FMA_EVERYWHERE := $(shell $(CC) -Werror --param=avoid-fma-max-bits=0 -x c -c /dev/null -o /dev/null \
                          2>/dev/null && echo --param=avoid-fma-max-bits=0)
CFLAGS += $(FMA_EVERYWHERE)
LDLIBS = $(strip $(PLATFORM_LIBS) -lm -lcjson -lz -llapacke $(OPENMP_LIBS))
# The compiler and flags that made the objects in $(BUILD): when they change
# (CC=clang, PORTABLE=1, another target's compiler), every object is made
# again rather than linked with objects made for another compiler or CPU.
BUILD_FLAGS = $(BUILD)/build-flags.txt

# Rooms, bottom to top (each includes only from the rooms below it):
#   base/ -> kernels/ -> model/, data/ -> optim/, infer/, interpret/ -> viz/ -> the programs train/, sample/, attn/
BASE_SRC = base/util.c base/options.c base/files.c base/safetensors.c base/thread_tuner.c
BASE_SRC += base/gguf.c base/png.c base/base64.c base/page_template.c
KERNELS_SRC = kernels/matmul.c kernels/matmul_fp32.c kernels/matmul_fp32_avx2.c kernels/matmul_fp32_avx512.c \
              kernels/matmul_bf16.c kernels/bf16_portable.c kernels/bf16_avx2.c kernels/bf16_avx512f.c \
              kernels/bf16_avx512.c kernels/bf16_amx.c kernels/transpose.c kernels/cpu_features.c
MODEL_SRC = model/ops.c model/dropout.c model/attention.c model/gpt.c model/transformer.c model/packed_weights.c model/block.c
DATA_SRC = data/vocab.c data/dataset.c data/corpus_files.c
OPTIM_SRC = optim/adamw.c optim/muon.c
INFER_SRC = infer/checkpoint.c infer/sampler.c infer/kv_cache.c infer/threads.c
INTERPRET_SRC = interpret/interpret.c
INTERPRET_SRC += interpret/patching.c interpret/head_scores.c interpret/induction_measures.c \
                 interpret/circuit_tables.c
VIZ_SRC = viz/heatmap.c viz/font.c viz/draw.c viz/unifont.c viz/scores.c viz/score_grid.c viz/ablation_grid.c viz/logit_lens.c viz/attribution_chart.c viz/position_circuit.c \
          viz/circuits.c viz/atlas.c viz/explorer.c viz/plot.c
VIZ_SRC += viz/patching_chart.c viz/snapshot.c viz/atlas_charts.c
TRAIN_LIB_SRC = train/train_state.c train/train_options.c train/run_folder.c \
                train/progress.c train/run.c train/run_flags.c train/average.c train/distributed.c \
                train/recipes.c train/named_recipes.c train/loss_plot.c
LIB_SRC = $(BASE_SRC) $(KERNELS_SRC) $(MODEL_SRC) $(DATA_SRC) $(OPTIM_SRC) $(INFER_SRC) $(INTERPRET_SRC)
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)

TEST_SRC = $(wildcard tests/*.c)
TEST_OBJ = $(TEST_SRC:%.c=$(BUILD)/%.o)

ATTN_LIB_SRC = $(VIZ_SRC)
# bin/attn --html's explorer: its HTML, CSS and JavaScript (page/attn_*),
# embedded as byte arrays by page/embed.sh (viz/explorer.c fills them in).
ATTN_PAGE = page/attn_explorer.html page/attn_explorer.css page/attn_explorer.js \
            page/attn_analyses.js page/attn_attribution_note.js
ATTN_LIB_OBJ = $(ATTN_LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/page/attn_assets.o

PROGRAMS = $(BIN)/train $(BIN)/sample $(BIN)/attn
# bin/export: a checkpoint as GGUF for llama.cpp, or in Hugging Face's layout (docs/export.md)
PROGRAMS += $(BIN)/export

.DEFAULT_GOAL := all

# ---- the model in the page: bin/explore writes one HTML file holding the
# model's weights and the forward compiled to WebAssembly from the same C
# sources (page/page_model.c calls them; docs/explore.md). The module is
# built with clang's wasm32-wasi target against Debian's wasi-libc (the
# packages clang, lld, wasi-libc, libclang-rt-14-dev-wasm32): portable
# kernels (no x86 variant runs there), one thread (OpenMP's calls answered
# by base/no_openmp/omp.h), WebAssembly's 128-bit SIMD. bin/explore is
# built with the other programs where that toolchain is installed, and
# `make explore` says what is missing where it is not. The page's HTML, CSS
# and JavaScript (page/explore.*) and the module are embedded in bin/explore
# as byte arrays (page/embed.sh).
WASM_CC ?= clang
WASM_SYSROOT ?= /usr
WASM_FLAGS = --target=wasm32-wasi --sysroot=$(WASM_SYSROOT) -mexec-model=reactor -O2 -msimd128 \
             -std=c11 -D_GNU_SOURCE -ffp-contract=fast -fno-math-errno -Wall -Wextra \
             -Ibase/no_openmp -Wno-unknown-pragmas -Wno-unused-function
WASM_SRC = base/util.c base/options.c $(KERNELS_SRC) $(MODEL_SRC) infer/sampler.c infer/kv_cache.c \
           interpret/interpret.c interpret/head_scores.c page/page_model.c
WASM_TOOLCHAIN := $(shell command -v $(WASM_CC) >/dev/null 2>&1 && \
                    echo 'int main(void){return 0;}' | $(WASM_CC) $(WASM_FLAGS) -x c - -o /dev/null \
                    >/dev/null 2>&1 && echo yes)
PAGE_ASSETS = page/explore.html page/explore.css page/explore.js
ifeq ($(WASM_TOOLCHAIN),yes)
PROGRAMS += $(BIN)/explore
endif

$(BUILD)/page/model.wasm: $(WASM_SRC) $(wildcard */*.h)
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_FLAGS) $(WASM_SRC) -o $@ -lm

$(BUILD)/page/assets.c: page/embed.sh $(PAGE_ASSETS) $(BUILD)/page/model.wasm
	page/embed.sh $@ explore_html page/explore.html explore_css page/explore.css \
	    explore_js page/explore.js explore_wasm $(BUILD)/page/model.wasm

$(BUILD)/page/assets.o: $(BUILD)/page/assets.c
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/page/attn_assets.c: page/embed.sh $(ATTN_PAGE)
	@mkdir -p $(dir $@)
	page/embed.sh $@ attn_explorer_html page/attn_explorer.html attn_explorer_css page/attn_explorer.css \
	    attn_explorer_js page/attn_explorer.js attn_analyses_js page/attn_analyses.js \
	    attn_attribution_note_js page/attn_attribution_note.js

$(BUILD)/page/attn_assets.o: $(BUILD)/page/attn_assets.c
	$(CC) $(CFLAGS) -c $< -o $@

$(BIN)/explore: $(BUILD)/explore/explore.o $(BUILD)/page/assets.o $(ATTN_LIB_OBJ) $(LIB_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

ifeq ($(WASM_TOOLCHAIN),yes)
explore: $(BIN)/explore
else
explore:
	@echo "make explore: no WebAssembly toolchain ($(WASM_CC) --target=wasm32-wasi with wasi-libc); install it:" >&2
	@echo "  apt-get install -y --no-install-recommends clang lld wasi-libc libclang-rt-14-dev-wasm32" >&2
	@exit 1
endif
.PHONY: explore

# ---- make MPI=1: also bin-mpi/train, built with Debian's mpicc and
# -DUSE_MPI (train/distributed.c; see docs/distributed.md), its objects in
# build-mpi/. bin/ stays the plain build, which needs no MPI. `make test`
# runs the MPI tests with bin-mpi/train when it exists (they are skipped
# otherwise); `make test MPI=1` builds it first.
MPICC ?= mpicc
MPI_BUILD = build-mpi
ifdef MPI
PROGRAMS += bin-mpi/train
endif

all: $(PROGRAMS)

$(MPI_BUILD)/%.o: %.c $(BUILD_FLAGS)
	@mkdir -p $(dir $@)
	OMPI_CC=$(CC) $(MPICC) $(CFLAGS) -DUSE_MPI -c $< -o $@

bin-mpi/train: $(BUILD)/train/train.o $(filter-out $(BUILD)/train/distributed.o,$(TRAIN_LIB_SRC:%.c=$(BUILD)/%.o)) \
               $(MPI_BUILD)/train/distributed.o $(ATTN_LIB_OBJ) $(LIB_OBJ)
	@mkdir -p bin-mpi
	OMPI_CC=$(CC) $(MPICC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The cost of summing gradients across processes, in rank order against
# MPI_Allreduce, and steps of R processes x 1 thread against 1 process x R
# threads (both shapes): `make bench MPI=1`.
bin-mpi/bench_reduce: scripts/bench_reduce.c train/distributed.c $(LIB_SRC) $(wildcard */*.h)
	@mkdir -p bin-mpi
	OMPI_CC=$(CC) $(MPICC) $(filter-out -MMD -MP,$(CFLAGS)) -DUSE_MPI scripts/bench_reduce.c \
	    train/distributed.c $(LIB_SRC) -o $@ $(LDLIBS)

# $(BUILD_FLAGS) (above) is written only when the compiler or flags differ
# from the ones it holds, so its time says when they last changed.
$(BUILD_FLAGS): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(CFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS)' >$@
FORCE:

$(BUILD)/%.o: %.c $(BUILD_FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BIN)/train: $(BUILD)/train/train.o $(TRAIN_LIB_SRC:%.c=$(BUILD)/%.o) $(ATTN_LIB_OBJ) $(LIB_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BIN)/sample: $(BUILD)/sample/sample.o $(LIB_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# bin/attn's own files: main, its flags, its inputs, its outputs, its folder
ATTN_PROGRAM_SRC = attn/attn.c attn/attn_options.c attn/attn_inputs.c attn/attn_outputs.c \
                   attn/attn_folder.c

$(BIN)/attn: $(ATTN_PROGRAM_SRC:%.c=$(BUILD)/%.o) $(ATTN_LIB_OBJ) $(LIB_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# bin/export's own files: main, the formats, the GGUF file, the hf folder
EXPORT_PROGRAM_SRC = export/export.c export/export_formats.c export/export_gguf.c export/export_hf.c

$(BIN)/export: $(EXPORT_PROGRAM_SRC:%.c=$(BUILD)/%.o) $(LIB_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BIN)/tests: $(TEST_OBJ) $(TRAIN_LIB_SRC:%.c=$(BUILD)/%.o) $(ATTN_LIB_OBJ) $(LIB_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The benchmark's breakdown by op: the ops' files compiled with
# -finstrument-functions (their entries and exits call scripts/bench.c's
# timers), so it is built from source on its own rather than from the
# normal objects. Left out: what is inlined (clang instruments after
# inlining; GCC is told the headers' functions) and, with GCC, the 6-row
# tiles, called thousands of times a product.
PROFILED_SRC = model/ops.c model/attention.c kernels/matmul.c
INSTRUMENT_OPS := $(shell $(CC) -Werror -finstrument-functions-after-inlining -x c -c /dev/null \
                      -o /dev/null 2>/dev/null && echo -finstrument-functions-after-inlining || \
                      echo -finstrument-functions -finstrument-functions-exclude-function-list=tile \
                           -finstrument-functions-exclude-file-list=.h,/usr/)
bin/bench: scripts/bench.c scripts/bench_history.c $(LIB_SRC) $(wildcard */*.h)
	@mkdir -p bin
	for f in $(PROFILED_SRC); do \
	    mkdir -p $(BUILD)/profiled/$$(dirname $$f) && $(CC) $(filter-out -MMD -MP,$(CFLAGS)) $(INSTRUMENT_OPS) \
	        -c $$f -o $(BUILD)/profiled/$${f%.c}.o || exit 1; \
	done
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) scripts/bench.c scripts/bench_history.c $(filter-out $(PROFILED_SRC),$(LIB_SRC)) \
	    $(PROFILED_SRC:%.c=$(BUILD)/profiled/%.o) -o $@ $(LDLIBS)

# The recipes' fp32 products alone (scripts/bench_products.c): two builds
# of it, before and after a change to kernels/, run in turn.
bin/bench_products: scripts/bench_products.c $(LIB_OBJ)
	@mkdir -p bin
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) $^ -o $@ $(LDLIBS)

# Sampling speeds of every mode (exact, --slide 32, 16 samples): issue 14.
bin/bench_sample: scripts/bench_sample.c scripts/bench_history.c $(LIB_SRC) $(wildcard */*.h)
	@mkdir -p bin
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) scripts/bench_sample.c scripts/bench_history.c $(LIB_SRC) -o $@ $(LDLIBS)

# Each figure is also appended to the history file, with the commit measured
# (-dirty when the code has uncommitted changes; the history's own new rows
# do not count).
BENCH_HISTORY = docs/bench_history.csv
BENCH_RECORD = --history $(BENCH_HISTORY) --commit $$(git rev-parse --short HEAD)$$(git diff \
               --quiet HEAD -- . ':(exclude)$(BENCH_HISTORY)' || echo -dirty)
ifdef MPI
bench: bin/bench bin/bench_sample bin-mpi/train bin-mpi/bench_reduce
	./bin/bench $(BENCH_RECORD)
	./bin/bench_sample $(BENCH_RECORD)
	scripts/bench_mpi.sh
else
bench: bin/bench bin/bench_sample
	./bin/bench $(BENCH_RECORD)
	./bin/bench_sample $(BENCH_RECORD)
endif

# Every recipe's shape on each fp32 variant this CPU runs (GPT_KERNELS,
# docs/platforms.md): AVX-512's, then AVX2's (the CPUs most people have);
# a variant the CPU lacks is refused in one line and skipped.
bench-recipes: bin/bench
	for k in avx512 avx2; do GPT_KERNELS=$$k ./bin/bench --recipes $(BENCH_RECORD) || true; done

# Passive waiting: on a busy machine (CI), threads that spin at OpenMP
# barriers steal the cores the working threads need.
test: bin/tests $(PROGRAMS)
	OMP_WAIT_POLICY=passive ./bin/tests

# ---- make test-arm64: the ARM64 build (CROSS=aarch64-linux-gnu-, above)
# and the tests an emulated CPU runs in a few minutes, under qemu-user
# (Debian's gcc-aarch64-linux-gnu and qemu-user-static, and the arm64
# builds of libcjson-dev, zlib1g-dev, liblapacke-dev and libgomp1:
# docs/platforms.md). The tests run bin/train, bin/sample and bin/attn by
# name: in $(ARM64)/emulated/bin these
# are scripts that start the ARM64 programs under qemu (the host needs no
# binfmt_misc entry), and the suite runs from $(ARM64)/emulated. Left out
# (tens of times slower emulated): the tests of the default shape, the
# signals', the MPI and the threads' suites, the atlas' and the recipes';
# and the memory estimate's, which starts a copy of the test binary as
# /proc/PID/exe, under emulation qemu itself.
ARM64_CROSS = aarch64-linux-gnu-
ARM64 = build-$(ARM64_CROSS:%-=%)
QEMU_ARM64 ?= qemu-aarch64-static
ARM64_SUITES = data ops attention model checkpoint train sample heatmap bf16 layout optimizer
ARM64_SKIP = --skip 'default shape' --skip 'greedy decoding' --skip 'generated together' \
             --skip 'next window' --skip 'bf16 weights' --skip 'memory estimate'

test-arm64:
	$(MAKE) CROSS=$(ARM64_CROSS) all $(ARM64)/bin/tests
	@mkdir -p $(ARM64)/emulated/bin
	for p in train sample attn; do \
	    printf '#!/bin/sh\nexec $(QEMU_ARM64) %s "$$@"\n' "$(CURDIR)/$(ARM64)/bin/$$p" >$(ARM64)/emulated/bin/$$p && \
	    chmod +x $(ARM64)/emulated/bin/$$p || exit 1; \
	done
	ln -sfn ../../data $(ARM64)/emulated/data
	cd $(ARM64)/emulated && OMP_WAIT_POLICY=passive $(QEMU_ARM64) ../bin/tests $(ARM64_SUITES) $(ARM64_SKIP)

# ---- make sanitize: the whole test suite under AddressSanitizer and
# UndefinedBehaviorSanitizer, built with gcc; any error fails the test that
# triggered it. Objects go to build-san/obj, programs to build-san/bin, and
# the suite runs from build-san (with a link to data/), so the bin/train,
# bin/sample, bin/attn the tests run are the sanitized ones and bin/ is left
# alone. A sanitizer error exits 99, so no test can mistake it for a
# program's own error exit. Leaks are checked in the test binary, where
# every library call must free what it allocated, even when it fails; not
# in the programs, which end an error with exit(1) and their data still
# allocated (the $(SAN)/obj/no_leak_check.o they are linked with), except
# the MPI build's bin-mpi/train (below). GPT_CHECK_BUFFER_LIVES: the
# backward's shared buffers get memory of their own and are poisoned with
# NaN where their lives end (model/gpt.c), so the gradient checks catch a
# read after one.
SAN = build-san
SAN_CFLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
             -std=c11 -D_GNU_SOURCE -ffp-contract=fast -fno-math-errno -Wall -Wextra -fopenmp -MMD -MP \
             -DGPT_CHECK_BUFFER_LIVES
SAN_LIB_OBJ = $(LIB_SRC:%.c=$(SAN)/obj/%.o)
SAN_TRAIN_OBJ = $(TRAIN_LIB_SRC:%.c=$(SAN)/obj/%.o)
SAN_ATTN_OBJ = $(ATTN_LIB_SRC:%.c=$(SAN)/obj/%.o) $(SAN)/obj/page/attn_assets.o
SAN_ENV = ASAN_OPTIONS=exitcode=99 UBSAN_OPTIONS=print_stacktrace=1:exitcode=99 \
          OMP_WAIT_POLICY=passive

$(SAN)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	gcc $(SAN_CFLAGS) -c $< -o $@

$(SAN)/obj/no_leak_check.o:
	@mkdir -p $(dir $@)
	echo 'const char *__asan_default_options(void) { return "detect_leaks=0"; }' | gcc -x c -c - -o $@

$(SAN)/bin/train: $(SAN)/obj/no_leak_check.o $(SAN)/obj/train/train.o $(SAN_TRAIN_OBJ) $(SAN_ATTN_OBJ) $(SAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	gcc $(SAN_CFLAGS) $^ -o $@ $(LDLIBS)

$(SAN)/bin/sample: $(SAN)/obj/no_leak_check.o $(SAN)/obj/sample/sample.o $(SAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	gcc $(SAN_CFLAGS) $^ -o $@ $(LDLIBS)

$(SAN)/bin/attn: $(SAN)/obj/no_leak_check.o $(ATTN_PROGRAM_SRC:%.c=$(SAN)/obj/%.o) $(SAN_ATTN_OBJ) $(SAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	gcc $(SAN_CFLAGS) $^ -o $@ $(LDLIBS)

$(SAN)/bin/export: $(SAN)/obj/no_leak_check.o $(EXPORT_PROGRAM_SRC:%.c=$(SAN)/obj/%.o) $(SAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	gcc $(SAN_CFLAGS) $^ -o $@ $(LDLIBS)
sanitize: $(SAN)/bin/export

# The pages' embedded files, as the plain build makes them; bin/explore where
# the WebAssembly toolchain is (its module and page, linked with the
# sanitized objects).
$(SAN)/obj/page/%.o: $(BUILD)/page/%.c
	@mkdir -p $(dir $@)
	gcc $(SAN_CFLAGS) -c $< -o $@

$(SAN)/bin/explore: $(SAN)/obj/no_leak_check.o $(SAN)/obj/explore/explore.o $(SAN)/obj/page/assets.o \
                    $(SAN_ATTN_OBJ) $(SAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	gcc $(SAN_CFLAGS) $^ -o $@ $(LDLIBS)
ifeq ($(WASM_TOOLCHAIN),yes)
sanitize: $(SAN)/bin/explore
endif

$(SAN)/bin/tests: $(TEST_SRC:%.c=$(SAN)/obj/%.o) $(SAN_TRAIN_OBJ) $(SAN_ATTN_OBJ) $(SAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	gcc $(SAN_CFLAGS) $^ -o $@ $(LDLIBS)

# With MPI (MPI=1, or bin-mpi/train already built: as `make test` decides
# whether to run the MPI tests), also $(SAN)/bin-mpi/train, the same flags
# through mpicc with -DUSE_MPI (its distributed.o in $(SAN)/obj-mpi), which
# the MPI tests then run. Unlike the other programs it checks for leaks, so
# that train/distributed.c's are caught (its exits finalize MPI, even on an
# error, and leave nothing of ours unreachable). Open MPI and the libraries
# under it (PMIx, hwloc, libevent) keep allocations of their own past
# MPI_Finalize; tests/lsan-openmpi.supp suppresses the leaks allocated inside
# those libraries and nothing else. To see which library allocated, a leak's
# stack must reach through them: they have no frame pointers, so this binary
# unwinds malloc's stacks by their unwind tables (fast_unwind_on_malloc=0,
# $(SAN)/obj/mpi_leak_check.o; about 2 s more per mpirun), and Open MPI keeps
# its plugins loaded until the leak check (disable_dlclose).
SAN_MPI_SUPP = $(CURDIR)/tests/lsan-openmpi.supp
SAN_ENV += LSAN_OPTIONS=suppressions=$(SAN_MPI_SUPP):print_suppressions=0 \
           OMPI_MCA_mca_base_component_disable_dlclose=1
ifneq ($(MPI)$(wildcard bin-mpi/train),)
SAN_PROGRAMS_MPI = $(SAN)/bin-mpi/train
endif

$(SAN)/obj-mpi/%.o: %.c
	@mkdir -p $(dir $@)
	OMPI_CC=gcc $(MPICC) $(SAN_CFLAGS) -DUSE_MPI -c $< -o $@

$(SAN)/obj/mpi_leak_check.o:
	@mkdir -p $(dir $@)
	echo 'const char *__asan_default_options(void) { return "fast_unwind_on_malloc=0"; }' | gcc -x c -c - -o $@

$(SAN)/bin-mpi/train: $(SAN)/obj/mpi_leak_check.o $(SAN)/obj/train/train.o $(filter-out $(SAN)/obj/train/distributed.o,$(SAN_TRAIN_OBJ)) \
                      $(SAN)/obj-mpi/train/distributed.o $(SAN_ATTN_OBJ) $(SAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	OMPI_CC=gcc $(MPICC) $(SAN_CFLAGS) $^ -o $@ $(LDLIBS)

sanitize: $(SAN)/bin/tests $(SAN)/bin/train $(SAN)/bin/sample $(SAN)/bin/attn $(SAN_PROGRAMS_MPI)
	ln -sfn ../data $(SAN)/data
	cd $(SAN) && $(SAN_ENV) ./bin/tests

# ---- make fuzz: libFuzzer targets (clang, with address and undefined
# sanitizers) for the checkpoint loader, the UTF-8 corpus reader and the
# option parser, FUZZ_SECONDS each (FUZZ_TARGETS="corpus" for one). Needs
# clang, libclang-rt-14-dev and libomp-14-dev. New inputs are kept in
# build-fuzz/corpus/, crashes in build-fuzz/crashes/; the seeds are
# fuzz/corpus/<target>/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= safetensors corpus options
FUZZ_TARGETS += gguf
FUZZ = build-fuzz
FUZZ_CFLAGS = -O2 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fopenmp \
              -std=c11 -D_GNU_SOURCE -Wall -Wno-unknown-pragmas -Wno-pass-failed
# Each target links what it tests and what that calls, named from the
# source lists above (by file name where it takes part of a list, so a
# file may move between rooms), so that a room's new calls elsewhere
# (train/ drawing with viz/) cannot break its link: the option parser; the
# corpus reader; the checkpoint loader, the forward it runs and the
# optimizer state's reader.
FUZZ_SRC_options = $(BASE_SRC)
FUZZ_SRC_corpus = $(BASE_SRC) $(DATA_SRC)
FUZZ_SRC_safetensors = $(sort $(LIB_SRC) $(filter %/adamw.c %/train_state.c,$(LIB_SRC) $(TRAIN_LIB_SRC)))
# the GGUF reader (base/gguf.c), what the export tests read back with
FUZZ_SRC_gguf = $(BASE_SRC) tests/gguf_reader.c

$(FUZZ)/fuzz_options: $(FUZZ_SRC_options)
$(FUZZ)/fuzz_corpus: $(FUZZ_SRC_corpus)
$(FUZZ)/fuzz_safetensors: $(FUZZ_SRC_safetensors)
$(FUZZ)/fuzz_gguf: $(FUZZ_SRC_gguf)
$(FUZZ)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(wildcard */*.h)
	@mkdir -p $(FUZZ)
	clang $(FUZZ_CFLAGS) $< $(FUZZ_SRC_$*) -o $@ $(LDLIBS)

fuzz: $(FUZZ_TARGETS:%=$(FUZZ)/fuzz_%)
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(FUZZ)/corpus/$$t $(FUZZ)/crashes/$$t && \
	    echo "fuzz_$$t: $(FUZZ_SECONDS) s" && \
	    OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 ./$(FUZZ)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
	        -print_final_stats=1 -artifact_prefix=$(FUZZ)/crashes/$$t/ \
	        $(FUZZ)/corpus/$$t fuzz/corpus/$$t || exit 1; \
	done

clean: clean-robust
clean-robust:
	rm -rf $(SAN) $(FUZZ)

.PHONY: sanitize fuzz clean-robust

clean:
	rm -rf build bin $(BUILD) $(BIN) $(MPI_BUILD) bin-mpi $(ARM64)

.PHONY: all test test-arm64 clean bench bench-recipes FORCE

-include $(shell find $(BUILD) $(MPI_BUILD) -name '*.d' 2>/dev/null)
-include $(shell find $(SAN) -name '*.d' 2>/dev/null)
# Every output, bit for bit, against a baseline commit (scripts/check_identity.sh -h).
identity:
	scripts/check_identity.sh

# Every command of README.md and docs/*.md as written, after the Quick start
# (scripts/check_doc_commands.sh -h).
check-docs: $(PROGRAMS)
	scripts/check_doc_commands.sh
.PHONY: check-docs
