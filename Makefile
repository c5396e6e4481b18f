# clgemma — build, test, serve. See README.md.
.DEFAULT_GOAL := all
CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -D_GNU_SOURCE -DCL_TARGET_OPENCL_VERSION=120 -MMD -MP
LDLIBS  := -lclblast -lOpenCL -ljson-c -lpcre2-8 -ljpeg -lpng16 -lwebp -lwebpdemux -lgif -lavformat -lavcodec -lswscale -lavutil -lcrypto -lm -lpthread
FCGI_LDLIBS := -lfcgi -lhttp_parser -lcurl -ljson-c

# the engine's rooms; each folder is on the engine's include path, so headers are named without their
# folder. fcgi/ and cli/ see only the public headers (opencl/include); unit tests see everything.
ENGINE_DIRS := opencl opencl/include opencl/io opencl/models opencl/ops opencl/bench opencl/constrain
INC     := $(addprefix -I,$(ENGINE_DIRS))
build/obj/fcgi/%.o build/obj/cli/%.o: INC := -Iopencl/include
ENGINE_SRCS := $(foreach d,$(ENGINE_DIRS),$(wildcard $(d)/*.c))
ENGINE_OBJS := $(ENGINE_SRCS:%.c=build/obj/%.o)
CLI_SRCS    := $(wildcard cli/*.c)
CLI_OBJS    := $(CLI_SRCS:%.c=build/obj/%.o)
FCGI_SRCS   := $(filter-out fcgi/main.c,$(wildcard fcgi/*.c))
FCGI_OBJS   := $(FCGI_SRCS:%.c=build/obj/%.o)
# unit tests mirror the tree (tests/opencl/<room>/, tests/fcgi/); each builds to build/tests/<name>
TEST_DIRS   := tests/opencl tests/opencl/io tests/opencl/models tests/opencl/ops tests/opencl/bench tests/opencl/constrain tests/fcgi
UNIT_SRCS   := $(foreach d,$(TEST_DIRS),$(wildcard $(d)/test_*.c))
UNIT_BINS   := $(addprefix build/tests/,$(basename $(notdir $(UNIT_SRCS))))
vpath test_%.c $(TEST_DIRS)
# the kernel files and the program each builds into: one manifest, in build order
KERNEL_MANIFEST := opencl/kernels/manifest.def
KERNELS     := $(shell sed -e 's/\#.*//' $(KERNEL_MANIFEST) | awk 'NF == 2 { print $$2 }')

# kernels are embedded into the library so the binaries run from any directory
build/obj/opencl/kernels_embed.o: build/gen/kernels_embed.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) -c $< -o $@
build/gen/kernels_embed.c: $(KERNEL_MANIFEST) $(KERNELS) tools/embed_kernels.sh
	@mkdir -p $(dir $@)
	sh tools/embed_kernels.sh $(KERNEL_MANIFEST) > $@.tmp && mv $@.tmp $@

BINS := build/clgemma build/clgemma-fcgi

.PHONY: all test serve stop run model setup clean gpu-prep
all: $(BINS) $(UNIT_BINS)

build/libclgemma.a: $(ENGINE_OBJS) build/obj/opencl/kernels_embed.o
	@mkdir -p $(dir $@)
	@rm -f $@ # made afresh: a moved or deleted source must not leave its object in the archive
	$(AR) rcs $@ $^

build/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) -c $< -o $@

build/clgemma: $(CLI_OBJS) build/libclgemma.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# the server less its main(): clgemma-fcgi and the fcgi unit tests link it
build/libclgemma-fcgi.a: $(FCGI_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

build/clgemma-fcgi: build/obj/fcgi/main.o build/libclgemma-fcgi.a build/libclgemma.a
	$(CC) $(CFLAGS) -o $@ $^ $(FCGI_LDLIBS) $(LDLIBS)

build/tests/%: %.c build/libclgemma.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) -Itests/lib -I$(dir $<) -o $@ $^ $(LDLIBS)

build/tests/test_fcgi_%: test_fcgi_%.c build/libclgemma-fcgi.a build/libclgemma.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) -Itests/lib -Ifcgi -o $@ $^ $(FCGI_LDLIBS) $(LDLIBS)

setup:
	@sh deploy/setup.sh

# references computed by Pillow at test time (tools/requirements.txt pins it), not committed
build/data/image_prep/cases.txt: tools/gen_image_prep_fixtures.py tools/image_writers.py
	.venv/bin/python tools/gen_image_prep_fixtures.py build/data/image_prep

model: setup
	@sh deploy/fetch_model.sh

# the float64 reference's logits of the tiny Qwen 3.5 fixtures at every position (tools/ref_qwen35.py --golden):
# made at test time, not committed (docs/design-qwen35.md section 6.1); layout in the golden JSON's "logits" section
QWEN35_GOLDEN := build/golden/qwen35_dense.logits build/golden/qwen35_moe.logits
build/golden/qwen35_%.logits: tests/golden/qwen35_%.json tools/ref_qwen35.py tools/ref_gemma4.py
	@mkdir -p $(dir $@)
	.venv/bin/python tools/ref_qwen35.py --golden $< $@
build/golden/qwen35_dense.logits: tests/fixtures/qwen35_dense_bf16.gguf tests/fixtures/qwen35_dense_q4_k_m.gguf
build/golden/qwen35_moe.logits: tests/fixtures/qwen35_moe_q8_0.gguf tests/fixtures/qwen35_moe_q4_k_m.gguf

test: setup
	@$(MAKE) --no-print-directory all build/data/image_prep/cases.txt $(QWEN35_GOLDEN)
	@sh deploy/fetch_model.sh
	@sh deploy/fetch_llama_ref.sh >/dev/null
	@sh tests/run_all.sh

# MODEL=path/to/file.gguf picks another GGUF for run and serve (default: the Gemma 3 270M base model,
# which continues text: run prompts it as a completion)
MODEL ?=
run: setup all model
	build/clgemma generate -m $(or $(MODEL),models/gemma-3-270m-q4_k_m.gguf) -p "The sky is blue because" -n 96

# .gpu/ for a device call: runtime libraries, the stripped binary, vocabulary, llama.cpp's source
gpu-prep: all
	@bash tools/gpu_prep.sh

clean:
	rm -rf build

-include $(shell find build/obj -name '*.d' 2>/dev/null)

# nginx (TLS, API key) + FastCGI workers on this machine; prints the URL, key and a curl line
serve:
	@$(if $(MODEL),CLGEMMA_MODEL="$(MODEL)") sh deploy/serve.sh

stop:
	@sh deploy/stop.sh

# structured-output random walks and mask timing (tests/suites/constrain_schemas.sh)
build/tools/constrain_walk: tools/constrain_walk.c build/libclgemma.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iopencl/include -o $@ $^ $(LDLIBS)
all: build/tools/constrain_walk

# a decode norm chain's device time by row and group width (a GPU-machine probe; docs/PERF.md)
build/tools/norm_cost: tools/norm_cost.c build/libclgemma.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iopencl -Iopencl/include -Iopencl/io -Iopencl/models -Iopencl/ops -o $@ $^ $(LDLIBS)
all: build/tools/norm_cost

# the engine's side of the Qwen 3.5 state drift test (tests/suites/qwen35_drift.sh)
build/tools/qwen35_drift: tools/qwen35_drift.c build/libclgemma.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iopencl/include -o $@ $^ $(LDLIBS)
all: build/tools/qwen35_drift
