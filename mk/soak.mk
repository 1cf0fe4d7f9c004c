# soak.mk - load, overload, soak and drain checks against the real daemon on
# 127.0.0.1 with wrk (tests/soak/; figures in docs/RELIABILITY.md). Each
# prints its figures and "N passed, N failed" last, and exits 1 on a failure.
#
#   make load-check                     capacity, 64/256 connections below the
#                                       admission limit, overload at --max-queue 8
#   make load-check DURATION=20         shorter phases (seconds; default 60)
#   make soak                           SOAK_SECONDS=600 of mixed load: RSS, fds,
#                                       threads to build/soak/soak.csv; then SIGTERM under load
#   make soak-quick                     the same with SOAK_SECONDS=60
# What they print is also kept in build/soak/{load-check,soak}-report.txt.
#
# One at a time: they load every core of the machine.
# Included by the top Makefile (-include mk/*.mk).

SOAK_DIR     := build/soak
DURATION     ?= 60
SOAK_SECONDS ?= 600
SOAK_ENV      = ATTN_SERVER_BIN=$(abspath $(BIN)) LOAD_DIR=$(abspath build/load) SOAK_OUT=$(abspath $(SOAK_DIR))

.PHONY: load-check soak soak-quick soak-deps

soak-deps:
	$(call need_pkgs,wrk curl python3-torch python3-numpy)

load-check: soak-deps $(BIN) ## load/overload check: zero non-2xx at 64/256 connections; 200/503+Retry-After at 4x; recovery < 1 s
	@mkdir -p $(SOAK_DIR); $(SOAK_ENV) DURATION=$(DURATION) timeout -k 10 $$(( 4 * $(DURATION) + 600 )) \
	  tests/soak/load-check.sh | tee $(SOAK_DIR)/load-check-report.txt; exit $${PIPESTATUS[0]}

soak: soak-deps $(BIN) ## SOAK_SECONDS (600) of mixed load: RSS/fds/threads growth < 5%, zero non-2xx; then SIGTERM under load
	@mkdir -p $(SOAK_DIR); $(SOAK_ENV) SOAK_SECONDS=$(SOAK_SECONDS) timeout -k 10 $$(( $(SOAK_SECONDS) + 600 )) \
	  tests/soak/soak.sh | tee $(SOAK_DIR)/soak-report.txt; exit $${PIPESTATUS[0]}

soak-quick: ## the soak and drain check with SOAK_SECONDS=60 (10 s warm-up)
	@SOAK_WARMUP=10 $(MAKE) --no-print-directory soak SOAK_SECONDS=60
