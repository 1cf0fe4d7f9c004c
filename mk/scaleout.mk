# Scale-out test: three daemons behind a real nginx, under wrk, one replica
# killed (-9) and one drained (SIGTERM) mid-run. Loopback only, ~30 s.

test-scaleout: $(BIN) ## 3 replicas behind nginx under wrk: kill -9 one, then SIGTERM one; clients must see no error
	$(call need_pkgs,$(PKGS_LB) curl)
	@ATTN_SERVER_BIN=$(abspath $(BIN)) timeout -k 10 300 tests/scaleout/test-scaleout.sh
