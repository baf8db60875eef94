# Builds the libFuzzer harness build/fuzz/fuzz_model straight from the C++ sources under
# src/core, onnx, graph, session, compute, providers/cpu and providers/cuda (the CUDA provider's g++ side, no device code; no Python),
# with clang's fuzzer, ASan and UBSan instrumentation.
# Used by `make fuzz`; incremental (one object per source, header dependencies tracked).
FUZZ_CXX    ?= clang++
FUZZ_OUT    ?= build/fuzz
FUZZ_GXX    ?= g++
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c++17 -O1 -g -Iinclude -Isrc -pthread $(FUZZ_SAN) -Wno-unknown-pragmas
# The AVX2/AVX-512 GEMM kernels select their target with `#pragma GCC target`, which clang
# ignores: give those files the target on the command line (they run only after a CPU check).
FUZZ_AVX2   := -mavx2 -mfma
FUZZ_AVX512 := -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma

SRCS := $(sort $(wildcard src/core/*.cc) $(wildcard src/onnx/*.cc) $(wildcard src/graph/*.cc) $(wildcard src/session/*.cc) $(wildcard src/compute/*.cc) $(wildcard src/providers/cpu/*/*.cc) $(wildcard src/providers/cuda/*.cc))
OBJS := $(patsubst src/%.cc,$(FUZZ_OUT)/obj/%.o,$(SRCS))

all: $(FUZZ_OUT)/fuzz_model

$(FUZZ_OUT)/obj/compute/gemm_kernels_avx2.o: EXTRA := $(FUZZ_AVX2)
$(FUZZ_OUT)/obj/compute/gemm_kernels_avx512.o: EXTRA := $(FUZZ_AVX512)

# A few sources use GCC-only constructs that clang 14 rejects (`__builtin_cpu_supports("f16c")`,
# a non-dependent name in a discarded `if constexpr` branch of a generic lambda). Those fall
# back to g++ with ASan/UBSan but without coverage feedback; the clang error is kept in
# the object's .clang.log and the file is listed by `make fuzz`.
$(FUZZ_OUT)/obj/%.o: src/%.cc
	@mkdir -p $(dir $@)
	@echo "  CXX $<"
	@if $(FUZZ_CXX) $(FUZZ_CFLAGS) $(EXTRA) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@ 2>$@.clang.log; then \
	  rm -f $@.clang.log; \
	else \
	  echo "  (clang failed on $<, see $@.clang.log: building it with $(FUZZ_GXX), no coverage)"; \
	  $(FUZZ_GXX) -std=c++17 -O1 -g -Iinclude -Isrc -pthread $(FUZZ_SAN) -MMD -MP -c $< -o $@; \
	fi

$(FUZZ_OUT)/obj/fuzz_model.o: tools/fuzz/fuzz_model.cc
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_OUT)/fuzz_model: $(OBJS) $(FUZZ_OUT)/obj/fuzz_model.o
	$(FUZZ_CXX) $(FUZZ_SAN) -fsanitize=fuzzer -pthread $^ -o $@

-include $(OBJS:.o=.d) $(FUZZ_OUT)/obj/fuzz_model.d
