# fuzz.mk - `make fuzz`: libFuzzer targets (tests/fuzz/fuzz_*.c) built with
# Debian's clang-14 under AddressSanitizer + UBSan, each run for FUZZ_SECONDS
# on a copy of its committed seeds (tests/fuzz/corpus/<name>/) kept in
# $(BUILD)/fuzz/<name>/corpus, so the corpus grows from run to run without
# touching the repository. Fails when any target finds a crash, a leak, a
# timeout or a mismatch; the reproducer is in $(BUILD)/fuzz/<name>/artifacts/.
#   make fuzz                         every target, FUZZ_SECONDS=60 each
#   make fuzz FUZZ_SECONDS=300 FUZZ_TARGETS=json_diff
#   make fuzz-smoke                   CI: 40 s per target
#   make fuzz-repro                   replay tests/fuzz/crashes/* (known project bugs)
# FUZZ_JOBS targets run at once (default: one per CPU), each in one process
# on one core; their summary lines come in the order they finish. Five
# targets of 40 s took 209 s one at a time on 2 cores (CI), 125 s two at a
# time, at about the same executions a second per target.
# Included by the top Makefile (-include mk/*.mk).

FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= attend v2 safetensors numfmt json_diff
FUZZ_ARGS    ?=
FUZZ_JOBS    ?= $(shell nproc)
FUZZ_DIR     := $(BUILD)/fuzz
PKGS_FUZZ    ?= clang-14 libclang-rt-14-dev

# Sanitizers on everything; the fuzzer's coverage instrumentation on the
# project sources too (fuzzer-no-link), the libFuzzer main only at link.
# Every sanitizer report stops the run as a crash.
FUZZ_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS   := -std=c11 -O1 -g -fno-omit-frame-pointer $(filter-out -Werror,$(WARN)) -pthread
FUZZ_CPPFLAGS := -D_GNU_SOURCE -DATTN_VERSION='"$(VERSION)"' -Icore
FUZZ_SERVER_CPPFLAGS := -Iserver -Itests/fuzz # not for core/'s objects (the layering, as Makefile)

# Project sources each target links, and its libraries.
FUZZ_SRC_numfmt      := server/numfmt.c server/base64.c
FUZZ_SRC_json_diff   := server/json.c core/hugemem.c server/numfmt.c server/base64.c
FUZZ_SRC_safetensors := core/status.c core/safetensors.c core/weights.c core/gemm.c core/isa.c core/hugemem.c
# the whole engine (CORE_SRC, Makefile), so a new core file needs no edit here
FUZZ_SRC_attend      := $(CORE_SRC) server/json.c server/numfmt.c server/base64.c \
                        server/attend.c server/buf.c server/errors.c server/models.c \
                        server/tensor.c server/encoding.c server/answer.c server/mem.c \
                        server/sha256.c server/config.c
FUZZ_SRC_v2          := $(FUZZ_SRC_attend) server/v2.c
FUZZ_LIBS_numfmt      := -lm
FUZZ_LIBS_json_diff   := -ljansson -lm
FUZZ_LIBS_safetensors := -lm
FUZZ_LIBS_attend      := -lopenblas -ljansson -lm
FUZZ_LIBS_v2          := -lopenblas -ljansson -lm

# Longest input per target: a request body, a small file, one number, a document.
FUZZ_MAXLEN_attend      := 65536
FUZZ_MAXLEN_v2          := 65536
FUZZ_MAXLEN_safetensors := 16384
FUZZ_MAXLEN_numfmt      := 1024
FUZZ_MAXLEN_json_diff   := 16384

FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
FUZZ_HDRS := $(wildcard core/*.h server/*.h tests/fuzz/*.h)

.PHONY: deps-fuzz fuzz-build fuzz-smoke fuzz-repro fuzz-seeds

deps-fuzz: deps ## install clang-14 and libFuzzer (libclang-rt-14-dev) if missing
	$(call need_pkgs,$(PKGS_FUZZ))

$(FUZZ_DIR)/obj/%.o: %.c $(FUZZ_HDRS) mk/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(if $(filter core/%,$<),,$(FUZZ_SERVER_CPPFLAGS)) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c $< -o $@

# One link rule per target (explicit, so no .SECONDEXPANSION leaks into
# the other mk/ files).
define fuzz_link_rule
$(FUZZ_DIR)/fuzz_$(1): tests/fuzz/fuzz_$(1).c $(FUZZ_SRC_$(1):%.c=$(FUZZ_DIR)/obj/%.o) $(FUZZ_HDRS) mk/fuzz.mk
	@mkdir -p $$(dir $$@)
	$$(FUZZ_CC) $$(FUZZ_CPPFLAGS) $$(FUZZ_SERVER_CPPFLAGS) $$(FUZZ_CFLAGS) $$(FUZZ_SAN) -fsanitize=fuzzer $$< \
	  $(FUZZ_SRC_$(1):%.c=$(FUZZ_DIR)/obj/%.o) $(FUZZ_LIBS_$(1)) -o $$@
endef
$(foreach t,attend v2 safetensors numfmt json_diff,$(eval $(call fuzz_link_rule,$(t))))

fuzz-build: deps-fuzz ## build the libFuzzer targets (into build/release/fuzz/)
	@$(MAKE) --no-print-directory SKIP_DEPS=1 $(FUZZ_BINS)

# Each target starts once fewer than FUZZ_JOBS run (jobs -pr), and each
# one's own status is read by its pid at the end. Not `wait -n` with a
# count: two targets that finished in the same instant were reaped as one,
# the count went wrong, the rest ran one at a time, and the last `wait -n`
# found no child and failed the run (CI, 2026-12-06).
fuzz: fuzz-build ## run every fuzz target for FUZZ_SECONDS (default 60) each, FUZZ_JOBS at once; fail on any crash
	@rm -f $(FUZZ_DIR)/summary.txt; rc=0; pids=; \
	$(foreach t,$(FUZZ_TARGETS),while [ "$$(jobs -pr | wc -l)" -ge $(FUZZ_JOBS) ]; do sleep 0.2; done; \
	  tests/fuzz/run-fuzz $(FUZZ_DIR)/fuzz_$(t) tests/fuzz/corpus/$(t) \
	  $(FUZZ_DIR)/$(t) $(FUZZ_SECONDS) $(or $(FUZZ_MAXLEN_$(t)),4096) \
	  $(if $(wildcard tests/fuzz/$(t).dict),-dict=tests/fuzz/$(t).dict) $(FUZZ_ARGS) & \
	  pids="$$pids $$!"; ) \
	for p in $$pids; do wait $$p || rc=1; done; \
	echo "fuzz: $(FUZZ_SECONDS) s per target; corpora, artifacts and logs in $(FUZZ_DIR)/<target>/"; \
	exit $$rc

fuzz-smoke: ## CI: build and run every fuzz target for 25 s
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=25

# Each file tests/fuzz/crashes/<target>-<what>[.gz] is one input a project
# bug fails on (.gz: too big to commit plain); this replays them with the
# known-bug filters off and fails until every one is fixed.
fuzz-repro: fuzz-build ## replay the reproducers in tests/fuzz/crashes/ (fails while a bug is unfixed)
	@rc=0; for f in tests/fuzz/crashes/*; do \
	  [ -f "$$f" ] || continue; \
	  t=$$(basename "$$f"); t=$${t%%-*}; in="$$f"; \
	  case "$$f" in *.gz) in=$(FUZZ_DIR)/repro.in; gzip -dc "$$f" > "$$in";; esac; \
	  if [ ! -x $(FUZZ_DIR)/fuzz_$$t ]; then echo "$$f: no target fuzz_$$t"; rc=1; continue; fi; \
	  if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $(FUZZ_DIR)/fuzz_$$t \
	       -artifact_prefix=$(FUZZ_DIR)/ "$$in" >$(FUZZ_DIR)/repro.log 2>&1; then echo "fixed  $$f"; \
	  else echo "FAILS  $$f: $$(grep -m1 -E '^==[0-9]+==ERROR|runtime error|^fuzz_[a-z_]+: ' $(FUZZ_DIR)/repro.log | cut -c1-200)"; rc=1; fi; \
	done; exit $$rc

# The committed seeds are written by a small C program (deterministic).
fuzz-seeds: ## regenerate the committed seed corpora tests/fuzz/corpus/ (tests/fuzz/gen_seeds.c)
	@mkdir -p $(FUZZ_DIR) $(FUZZ_TARGETS:%=tests/fuzz/corpus/%)
	$(CC) -std=c11 -O1 $(WARN) tests/fuzz/gen_seeds.c -o $(FUZZ_DIR)/gen_seeds
	$(FUZZ_DIR)/gen_seeds tests/fuzz/corpus
