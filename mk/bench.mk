# bench.mk - `make bench`: the engine's forward pass against this machine's
# sgemm rate and against PyTorch (Debian's python3-torch), measured in one run
# and printed as a markdown table with the targets, PASS or FAIL as measured.
#   make bench                      the full run (minutes; use an idle machine)
#   make bench-quick                fewer repeats, no 8192-token case
#   make bench BENCH_ARGS='--threads 1 --strict'

BENCH_ARGS ?=

bench: deps-test $(BUILD)/bench/bench_attention ## benchmark attention against sgemm and PyTorch (markdown table, targets)
	$(BUILD)/bench/bench_attention --python $(PY) --torch-script tests/bench/torch_mha.py $(BENCH_ARGS)

bench-quick: deps-test $(BUILD)/bench/bench_attention ## the same, fewer repeats and no 8192-token case (a shared machine)
	$(BUILD)/bench/bench_attention --quick --python $(PY) --torch-script tests/bench/torch_mha.py $(BENCH_ARGS)

.PHONY: bench-quick
