# Build: `make` (bin/train), `make test`, `make bench`.
# Portable build (no -march=native, e.g. to copy binaries to another CPU):
#   make PORTABLE=1
CC ?= gcc
ifeq ($(CC),cc)
CC := gcc
endif
ifdef PORTABLE
ARCH_FLAGS ?= -O3
else
ARCH_FLAGS ?= -O3 -march=native
endif
CFLAGS ?= $(ARCH_FLAGS)
CFLAGS += -std=c11 -D_GNU_SOURCE -ffp-contract=fast -Wall -Wextra -fopenmp -MMD -MP
LDLIBS = -lm -lcjson
BUILD = build

MODEL_SRC = model/util.c model/matmul.c model/ops.c model/attention.c model/gpt.c \
            model/safetensors.c model/checkpoint.c model/kv_cache.c
DATA_SRC = data/vocab.c data/dataset.c
TRAIN_LIB_SRC = train/options.c train/adamw.c train/train_state.c
LIB_SRC = $(MODEL_SRC) $(DATA_SRC)
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)

TEST_SRC = $(wildcard tests/*.c)
TEST_OBJ = $(TEST_SRC:%.c=$(BUILD)/%.o)

ATTN_LIB_SRC = attn/heatmap.c attn/font.c
ATTN_LIB_OBJ = $(ATTN_LIB_SRC:%.c=$(BUILD)/%.o)

PROGRAMS = bin/train bin/sample bin/attn

all: $(PROGRAMS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

bin/train: $(BUILD)/train/train.o $(TRAIN_LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/sample/sampler.o $(ATTN_LIB_OBJ) $(LIB_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

bin/sample: $(BUILD)/sample/sample.o $(BUILD)/sample/sampler.o $(BUILD)/train/options.o $(LIB_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

bin/attn: $(BUILD)/attn/attn.o $(ATTN_LIB_OBJ) $(BUILD)/train/options.o $(LIB_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

bin/tests: $(TEST_OBJ) $(TRAIN_LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/sample/sampler.o $(ATTN_LIB_OBJ) $(LIB_OBJ)
	@mkdir -p bin
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The benchmark has per-op timers compiled in (-DPROFILE_OPS), so it is
# built from source on its own rather than from the normal objects.
bin/bench: scripts/bench.c $(LIB_SRC) train/adamw.c sample/sampler.c $(wildcard model/*.h)
	@mkdir -p bin
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -DPROFILE_OPS scripts/bench.c $(LIB_SRC) train/adamw.c sample/sampler.c -o $@ $(LDLIBS)

bench: bin/bench
	./bin/bench

# Passive waiting: on a busy machine (CI), threads that spin at OpenMP
# barriers steal the cores the working threads need.
test: bin/tests $(PROGRAMS)
	OMP_WAIT_POLICY=passive ./bin/tests

clean:
	rm -rf $(BUILD) bin

.PHONY: all test clean bench

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
