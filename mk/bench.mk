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
