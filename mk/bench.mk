# bench.mk - `make bench`: the engine's forward pass against this machine's
# sgemm rate and against PyTorch (Debian's python3-torch), and the
# long-context forms of weights (top-k, weight rows) against the pass without
# weights, with their peak RSS and answer sizes over HTTP (the daemon),
# measured in one run and printed as markdown tables with the targets, PASS
# or FAIL as measured.
#   make bench                      the full run (minutes; use an idle machine)
#   make bench-quick                fewer repeats, no 8192-token case
#   make bench BENCH_ARGS='--threads 1 --strict'

BENCH_ARGS ?=

bench: deps-test $(BIN) $(BUILD)/bench/bench_attention ## benchmark attention against sgemm and PyTorch, and the long-context weights (markdown tables, targets)
	$(BUILD)/bench/bench_attention --python $(PY) --torch-script tests/bench/torch_mha.py --server $(BIN) $(BENCH_ARGS)

bench-quick: deps-test $(BIN) $(BUILD)/bench/bench_attention ## the same, fewer repeats and no 8192-token case (a shared machine)
	$(BUILD)/bench/bench_attention --quick --python $(PY) --torch-script tests/bench/torch_mha.py --server $(BIN) $(BENCH_ARGS)

.PHONY: bench-quick

# `make bench-gemm [GEMM_ARGS='--rounds 7 512,768,2304 ...']`: the engine's
# matrix kernel alone, one thread, against OpenBLAS's sgemm and the FMA peak
# (tests/bench/bench_gemm.c): whether the kernel is the limit on this CPU.
GEMM_ARGS ?=

bench-gemm: deps $(BUILD)/bench/bench_gemm ## the engine's matrix kernel alone, one thread, against OpenBLAS's sgemm and the FMA peak, every kernel the CPU runs
	$(BUILD)/bench/bench_gemm $(GEMM_ARGS)

.PHONY: bench-gemm

# `make bench-ab BASE=<commit> [AB_ARGS='n E H threads weights seconds']`:
# the engine at BASE against the working tree's, both linked into one
# process and alternated pass by pass, with whether their outputs are the
# same bits (tests/bench/ab_engine.c, tests/bench/ab-build.sh); run with
# each in the first slot in turn, whose ratios' geometric mean cancels the
# slots' own difference (tests/bench/ab-both.sh). BASE's own
# Makefile builds its library, in build/ab/base. The way to tell whether an
# engine change pays: see docs/TESTING.md.
AB_DIR := build/ab
AB_ARGS ?=

bench-ab: deps $(BUILD)/libattn.a ## the engine at BASE=<commit> against the working tree's, alternated pass by pass in one process
	@test -n "$(BASE)" || { echo "usage: make bench-ab BASE=<commit> [AB_ARGS='512 768 12 2 0 10']" >&2; exit 2; }
	rm -rf $(AB_DIR) && mkdir -p $(AB_DIR)/base
	git archive --format=tar "$$(git rev-parse --verify '$(BASE)^{commit}')" | tar -x -C $(AB_DIR)/base
	$(MAKE) -C $(AB_DIR)/base build/release/libattn.a SKIP_DEPS=1
	tests/bench/ab-build.sh $(AB_DIR) $(AB_DIR)/base/build/release/libattn.a $(AB_DIR)/base/core $(BUILD)/libattn.a core
	tests/bench/ab-both.sh $(AB_DIR) $(AB_ARGS)

.PHONY: bench-ab
