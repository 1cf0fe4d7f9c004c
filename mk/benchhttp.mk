# `make bench-http`: wrk against the daemon (small/medium/large, float/base64)
# beside a minimal libmicrohttpd server, in one run; see tests/bench/bench-http.sh.
bench-http: deps-test $(BIN) $(BUILD)/bench/bench_minimal_mhd $(BUILD)/bench/bench_fma_peak ## HTTP benchmark: req/s, latency, decode/encode vs compute, vs a minimal server
	$(call need_pkgs,wrk)
	ATTN_SERVER_BIN=$(abspath $(BIN)) ATTN_MINIMAL_BIN=$(abspath $(BUILD)/bench/bench_minimal_mhd) ATTN_FMA_PEAK_BIN=$(abspath $(BUILD)/bench/bench_fma_peak) tests/bench/bench-http.sh

.PHONY: bench-http

# `make bench-memory`: the memory budget against 40 slow readers of 45 MB
# answers and 100 stalled 64 MiB uploads, with and without a budget; see
# tests/bench/memory_pressure.py.
bench-memory: deps-test $(BIN) ## memory budget: peak RSS, liveness and recovery under slow readers and stalled uploads
	@[ -s build/load/large.safetensors ] || $(PY) tests/load/make-weights.py build/load
	$(PY) tests/bench/memory_pressure.py $(abspath $(BIN)) build/load/large.safetensors $(or $(BUDGET_MIB),512)

.PHONY: bench-memory

# `make bench-reload`: reloads of an E = 1024 layer, idle and under 64
# connections: SIGHUP-to-serving time, failed requests, RSS; see
# tests/bench/bench-reload.sh.
bench-reload: $(BIN) $(BUILD)/tests/test_reload ## model reloads: SIGHUP-to-serving time, failed requests and RSS under 64 connections
	ATTN_SERVER_BIN=$(abspath $(BIN)) ATTN_RELOAD_TEST=$(abspath $(BUILD)/tests/test_reload) tests/bench/bench-reload.sh

.PHONY: bench-reload
