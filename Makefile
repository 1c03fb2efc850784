# strata — the one entry point.  `make`, `make test`, `make demo`,
# `make bench`, `make lint`, `make deps`, `make vmlinux`.  V=1 shows commands.
.DELETE_ON_ERROR:
.SUFFIXES:

ARCH       ?= x86
BUILD      := build
OBJ        := $(BUILD)/obj
ASAN_OBJ   := $(BUILD)/asan
GEN        := $(BUILD)/gen
BPFOUT     := $(BUILD)/bpf
CC         ?= cc
CLANG      ?= clang
BPFTOOL    ?= bpftool
PROTOC_C   ?= protoc-c

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

PKGS       := libbpf libdw libelf zlib libzstd liblzma
CFLAGS     ?= -O2 -g
CFLAGS     += -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
	      -Wno-missing-field-initializers -fno-omit-frame-pointer \
	      -D_GNU_SOURCE -I. -I$(GEN) -I$(BPFOUT) \
	      $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEPFLAGS    = -MMD -MP
LDLIBS     := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lbpf -ldw -lelf -lz -lzstd -llzma) \
	      -lprotobuf-c -lstdc++ -lpthread -lsqlite3 -lmicrohttpd -lcurl -lm
SAN_FLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=undefined

BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Ivmlinux/$(ARCH) \
	      -I. -Wall -Werror -Wno-unused-function

# --- sources -----------------------------------------------------------------
BPF_SRCS   := $(wildcard bpf/*.bpf.c)
BPF_OBJS   := $(patsubst bpf/%.bpf.c,$(BPFOUT)/%.bpf.o,$(BPF_SRCS))
SKELS      := $(patsubst bpf/%.bpf.c,$(BPFOUT)/%.skel.h,$(BPF_SRCS))
PROTOS     := $(wildcard proto/*.proto)
PROTO_C    := $(patsubst proto/%.proto,$(GEN)/%.pb-c.c,$(PROTOS))
PROTO_H    := $(PROTO_C:.c=.h)
MAINS      := agent/cli/strata_main.c agent/cli/agent_main.c server/server_main.c

# --- layers: one archive each ------------------------------------------------
# A layer is a top-level folder (and its subfolders).  Its archive holds its
# objects; lib's also holds the generated protobuf code.  A binary links only
# the archives its layer may use, in the order scripts/check_layers.sh derives
# from the allowed include arrows written there, so the linker enforces the
# arrows that `make lint` checks.  Three builds of every archive: plain
# (binaries, fixtures, bench), -san (unit tests, ASan/UBSan) and fuzz
# (libFuzzer targets, clang with coverage).
layer_srcs  = $(filter-out $(MAINS),$(wildcard $(1)/*.c $(1)/*/*.c))
PROTO_OBJS := $(patsubst $(GEN)/%.c,$(OBJ)/gen/%.o,$(PROTO_C))
layer_objs  = $(patsubst %.c,$(OBJ)/%.o,$(call layer_srcs,$(1))) \
	      $(if $(filter lib,$(1)),$(PROTO_OBJS))
# archives LAYER, VARIANT ("" or -san): what a LAYER binary links
link_order  = $(shell scripts/check_layers.sh --link $(1))
LINK_agent := $(call link_order,agent)
LINK_server := $(call link_order,server)
LINK_tests := $(call link_order,)
LAYERS     := $(LINK_tests)
archives    = $(foreach l,$(LINK_$(1)),$(BUILD)/libstrata-$(l)$(2).a)
FUZZ_OBJ   := $(BUILD)/fuzz/obj
FUZZ_CFLAGS := -std=gnu11 -g -O1 -Wall -Wextra -Werror -Wno-unused-parameter \
	      -Wno-missing-field-initializers -fno-omit-frame-pointer -D_GNU_SOURCE \
	      -I. -I$(GEN) -I$(BPFOUT) $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
	      -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
FIXTURE_SRCS := $(wildcard tests/fixtures/*.c)
FIXTURES   := $(patsubst tests/fixtures/%.c,$(BUILD)/fixtures/%,$(FIXTURE_SRCS)) \
	      $(patsubst tests/fixtures/%.cc,$(BUILD)/fixtures/%,$(wildcard tests/fixtures/*.cc)) \
	      $(BUILD)/fixtures/gpu_workload_static
CXX        ?= c++

BINS       := $(BUILD)/strata $(BUILD)/strata-agent $(BUILD)/strata-server

.PHONY: all test unit demo bench lint deps vmlinux clean fixtures format fuzz fuzz-replay \
	fuzz-archives
all: $(BINS)

# --- BPF ---------------------------------------------------------------------
# Every program's instruction count is printed so verifier-complexity growth
# shows up in review.  An object whose worst call chain needs more than the
# 512 bytes of stack that kernels before 6.13 allow (the development host's
# verifier would accept it) is refused here: scripts/check_bpf_stack.py.
$(BPFOUT)/%.bpf.o: bpf/%.bpf.c scripts/check_bpf_stack.py | $(BPFOUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(DEPFLAGS) -MF $(@:.o=.d) -MT $@ -c $< -o $@.tmp
	$(Q)$(BPFTOOL) gen object $@ $@.tmp && rm -f $@.tmp
	$(Q)scripts/check_bpf_stack.py $@ || { rm -f $@; exit 1; }
	$(Q)llvm-objdump -h $@ | while read -r idx name size rest; do \
		case "$$name" in perf_event*|tp*|tracepoint*|raw_tp*|uprobe*|uretprobe*|kprobe*|fentry*|iter*) \
		printf '  %-8s %s: %d insns\n' INSNS "$$name" $$(( 0x$$size / 8 ));; esac; done

# Kept after the skeletons are made (make would delete them as
# intermediates): test_bpf_stack_check and llvm-objdump read them.
.SECONDARY: $(BPF_OBJS)

$(BPFOUT)/%.skel.h: $(BPFOUT)/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

# --- protobuf ----------------------------------------------------------------
$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto | $(GEN)
	$(call msg,PROTOC,$<)
	$(Q)$(PROTOC_C) --proto_path=proto --c_out=$(GEN) $<

# --- C -----------------------------------------------------------------------
# Every object depends on the generated headers (skeletons, protobuf) so they
# exist before the first compile; -MMD -MP then tracks real header use.
$(OBJ)/gen/%.o: $(GEN)/%.c | $(PROTO_H)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Wno-error $(DEPFLAGS) -c $< -o $@

$(OBJ)/%.o: %.c | $(SKELS) $(PROTO_H)
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

$(ASAN_OBJ)/gen/%.o: $(GEN)/%.c | $(PROTO_H)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -Wno-error $(SAN_FLAGS) $(DEPFLAGS) -c $< -o $@

$(ASAN_OBJ)/%.o: %.c | $(SKELS) $(PROTO_H)
	@mkdir -p $(@D)
	$(call msg,CC-SAN,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_FLAGS) $(DEPFLAGS) -c $< -o $@

$(FUZZ_OBJ)/gen/%.o: $(GEN)/%.c | $(PROTO_H)
	@mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -Wno-error $(DEPFLAGS) -c $< -o $@

$(FUZZ_OBJ)/%.o: %.c | $(SKELS) $(PROTO_H)
	@mkdir -p $(@D)
	$(call msg,CC-FUZZ,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) $(DEPFLAGS) -c $< -o $@

define layer_archives
$(BUILD)/libstrata-$(1).a: $(call layer_objs,$(1))
	$$(call msg,AR,$$@)
	$$(Q)rm -f $$@ && ar rcs $$@ $$^

$(BUILD)/libstrata-$(1)-san.a: $(patsubst $(OBJ)/%,$(ASAN_OBJ)/%,$(call layer_objs,$(1)))
	$$(Q)rm -f $$@ && ar rcs $$@ $$^

$(BUILD)/fuzz/libstrata-$(1).a: $(patsubst $(OBJ)/%,$(FUZZ_OBJ)/%,$(call layer_objs,$(1)))
	$$(Q)rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call layer_archives,$(l))))

$(BUILD)/strata: $(OBJ)/agent/cli/strata_main.o $(call archives,agent)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/strata-agent: $(OBJ)/agent/cli/agent_main.o $(call archives,agent)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/strata-server: $(OBJ)/server/server_main.o $(call archives,server)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# Unit tests run under ASan/UBSan; a test may use any layer.
$(BUILD)/tests/%: $(ASAN_OBJ)/tests/unit/%.o $(call archives,tests,-san)
	@mkdir -p $(@D)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_FLAGS) $^ $(LDLIBS) -lcmocka -lunwind -ldl -o $@

# Fixtures: workloads with known call chains.  Flags per fixture come from a
# "// build:" line in its source, so each file says how it must be built.
$(BUILD)/fixtures/%: tests/fixtures/%.c
	@mkdir -p $(@D)
	$(call msg,FIXTURE,$@)
	$(Q)$(CC) $$(sed -n 's|^// build: ||p' $<) -o $@ $< $$(sed -n 's|^// link: ||p' $<)

$(BUILD)/fixtures/%: tests/fixtures/%.cc
	@mkdir -p $(@D)
	$(call msg,FIXTURE,$@)
	$(Q)$(CXX) $$(sed -n 's|^// build: ||p' $<) -o $@ $< $$(sed -n 's|^// link: ||p' $<)

# Fixtures that link fixture libraries.
$(BUILD)/fixtures/libnofpa.so: $(BUILD)/fixtures/libnofpb.so
$(BUILD)/fixtures/nofp_chain: $(BUILD)/fixtures/libnofpa.so $(BUILD)/fixtures/libnofpb.so
# The GPU layer's stand-in CUDA/NCCL libraries and the workloads on them.
GPU_SIM_HDRS := tests/fixtures/cuda_decls.h tests/fixtures/sim_device.h
$(BUILD)/fixtures/libcuda.so: $(GPU_SIM_HDRS)
$(BUILD)/fixtures/libcudart.so: $(BUILD)/fixtures/libcuda.so tests/fixtures/cudart.map $(GPU_SIM_HDRS)
$(BUILD)/fixtures/libnccl.so: $(BUILD)/fixtures/libcuda.so $(GPU_SIM_HDRS)
$(BUILD)/fixtures/libc10_cuda.so: $(BUILD)/fixtures/libcudart.so $(GPU_SIM_HDRS)
$(BUILD)/fixtures/gpu_workload $(BUILD)/fixtures/train_sim: $(BUILD)/fixtures/libcudart.so \
	$(BUILD)/fixtures/libcuda.so $(BUILD)/fixtures/libnccl.so $(GPU_SIM_HDRS)
# The runtime linked into the program instead (like libcudart_static.a, or
# libtorch_cuda.so carrying its own): the same sources, built the same way.
$(BUILD)/fixtures/cudart_static.o: tests/fixtures/libcudart.so.c $(GPU_SIM_HDRS)
	@mkdir -p $(@D)
	$(call msg,FIXTURE,$@)
	$(Q)$(CC) $$(sed -n 's|^// build: ||p' $< | sed 's/-shared//') -c -o $@ $<
$(BUILD)/fixtures/gpu_workload_static: tests/fixtures/gpu_workload.c \
	$(BUILD)/fixtures/cudart_static.o $(BUILD)/fixtures/libcuda.so $(BUILD)/fixtures/libnccl.so \
	$(GPU_SIM_HDRS)
	$(call msg,FIXTURE,$@)
	$(Q)$(CC) $$(sed -n 's|^// build: ||p' $<) -o $@ $< $(BUILD)/fixtures/cudart_static.o \
		-L$(BUILD)/fixtures -lcuda -lnccl -Wl,-rpath,'$$ORIGIN'

# Fixtures that link layer archives (named on their "// link:" lines): the
# synthetic batch generators, the scheduler drain-exactness check.  The
# headers are prerequisites too: a parallel `make all fixtures` once built
# one before them.
$(BUILD)/fixtures/gen_batch: $(BUILD)/libstrata-symbolize.a $(BUILD)/libstrata-lib.a $(PROTO_H)
$(BUILD)/fixtures/gen_scenario: $(BUILD)/libstrata-lib.a $(PROTO_H)
$(BUILD)/fixtures/sched_drain_exact: $(call archives,agent) $(SKELS)

fixtures: $(FIXTURES)

$(BPFOUT) $(GEN):
	@mkdir -p $@

# --- entry points ------------------------------------------------------------
deps:
	@scripts/deps.sh

vmlinux:
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > vmlinux/$(ARCH)/vmlinux.h

unit: $(UNIT_BINS)

test: deps
	@$(MAKE) --no-print-directory all unit fixtures $(FUZZ_ARCHIVES)
	@tests/run.sh

demo: deps
	@$(MAKE) --no-print-directory all fixtures
	@scripts/demo.sh

bench: deps
	@$(MAKE) --no-print-directory all fixtures
	@bench/overhead.sh

# libFuzzer targets for the parsers of outside input (FUZZ_SECONDS each),
# linked against the fuzz build of the layer archives.
FUZZ_ARCHIVES := $(foreach l,$(LINK_tests),$(BUILD)/fuzz/libstrata-$(l).a)
fuzz: deps $(SKELS) $(PROTO_H)
	@$(MAKE) --no-print-directory $(FUZZ_ARCHIVES)
	@CLANG="$(CLANG)" FUZZ_LDLIBS="$(LDLIBS)" tests/fuzz/run.sh $(or $(FUZZ_SECONDS),30)

# Every input of the committed corpora once (the suite's test_fuzz_corpus).
fuzz-replay: deps $(SKELS) $(PROTO_H)
	@$(MAKE) --no-print-directory $(FUZZ_ARCHIVES)
	@CLANG="$(CLANG)" FUZZ_LDLIBS="$(LDLIBS)" tests/fuzz/run.sh --replay

# The fuzz build of the layers, up to date (test_fuzz_corpus asks for it: a
# target compiled from today's headers against an older archive would see
# structs laid out otherwise).
fuzz-archives: $(SKELS) $(PROTO_H)
	@$(MAKE) --no-print-directory $(FUZZ_ARCHIVES)

lint:
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h' | grep -v '^vmlinux/')
	@scripts/check_layers.sh

format:
	@clang-format -i $$(git ls-files '*.c' '*.h' | grep -v '^vmlinux/')

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
