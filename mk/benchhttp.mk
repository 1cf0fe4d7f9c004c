# `make bench-http`: wrk against the daemon (small/medium/large, float/base64)
# beside a minimal libmicrohttpd server, in one run; see tests/bench/bench-http.sh.
bench-http: deps-test $(BIN) $(BUILD)/bench/bench_minimal_mhd ## HTTP benchmark: req/s, latency, decode/encode vs compute, vs a minimal server
	$(call need_pkgs,wrk)
	ATTN_SERVER_BIN=$(abspath $(BIN)) ATTN_MINIMAL_BIN=$(abspath $(BUILD)/bench/bench_minimal_mhd) tests/bench/bench-http.sh

.PHONY: bench-http
