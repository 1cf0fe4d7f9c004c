# Load tests with wrk (tests/load/*.lua): req/s and p50/p90/p99 per case:
# small (demo set, 5 x 64), medium (128 x 256, 8 heads), large (512 x 768,
# 12 heads), each as float JSON and as base64 tensors.
#
#   make load                              start a server with all three sets, load it
#   make load URL=http://127.0.0.1:8080    load a running server (cases whose set it lacks are skipped)
#   make load LOAD_DURATION=10s LOAD_CONNECTIONS=16

LOAD_DIR         := build/load
LOAD_WEIGHTS     := $(LOAD_DIR)/medium.safetensors $(LOAD_DIR)/large.safetensors
LOAD_DURATION    ?= 5s
LOAD_THREADS     ?= 2
LOAD_CONNECTIONS ?= 8
URL              ?=

.PHONY: load-weights

$(LOAD_WEIGHTS) &: tests/load/make-weights.py
	$(PY) tests/load/make-weights.py $(LOAD_DIR)

load-weights: $(LOAD_WEIGHTS) ## write build/load/{medium,large}.safetensors for the load scripts (PyTorch)

load: ## wrk on /attend: req/s and p50/p90/p99 per case (URL=... for a running server)
	$(call need_pkgs,wrk curl python3-torch python3-numpy)
	@if [ -z "$(URL)" ]; then $(MAKE) --no-print-directory $(BIN) $(LOAD_WEIGHTS) >/dev/null; fi
	@DURATION=$(LOAD_DURATION) THREADS=$(LOAD_THREADS) CONNECTIONS=$(LOAD_CONNECTIONS) \
	  ATTN_SERVER_BIN=$(abspath $(BIN)) LOAD_DIR=$(abspath $(LOAD_DIR)) tests/load/run-load.sh $(URL)
