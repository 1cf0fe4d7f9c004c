# `make valgrind`: the integration tests with the daemon under valgrind's
# memcheck. A leak (definite or indirect) or a memory error makes the daemon
# exit 99, which every test's daemon_stop(...) == 0 check turns into a
# failure. OpenBLAS is pinned to one thread beforehand so the daemon does not
# re-execute itself (valgrind would not follow the exec).
VALGRIND_TESTS ?= $(BUILD)/tests/test_api $(BUILD)/tests/test_v2

valgrind: deps-test $(BIN) $(INTEG_BIN) ## integration tests with the daemon under valgrind (no leak, no error)
	$(call need_pkgs,valgrind)
	@OPENBLAS_NUM_THREADS=1 ATTN_BLAS_REEXEC=off TEST_TIMEOUT=1800 \
	  ATTN_SERVER_WRAP="valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --log-file=build/valgrind-%p.log" \
	  ATTN_SERVER_BIN=$(abspath $(BIN)) tests/run-tests $(VALGRIND_TESTS); rc=$$?; \
	  for f in build/valgrind-*.log; do [ -s "$$f" ] && { echo "== $$f"; head -50 "$$f"; }; done; rm -f build/valgrind-*.log; exit $$rc

.PHONY: valgrind
