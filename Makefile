# attention-server - the one entry point. `make help` lists the targets.
#
# Sources are picked up by wildcard: core/*.c -> libattn (the engine),
# server/*.c except main.c -> libserver, tests/unit/test_*.c -> one test
# binary each. Sanitizer builds live in their own build directory:
#   make test SANITIZER=address,undefined      make test SANITIZER=thread

SHELL      := /bin/bash
CC         ?= cc
PREFIX     ?= /usr/local
DESTDIR    ?=
VERSION    := 0.1.0
SANITIZER  ?=
comma      := ,
PY         := /usr/bin/python3

ifeq ($(SANITIZER),)
  BUILD    := build/release
  BIN      := bin/attention-server
  OPT      := -O2
  SANFLAGS :=
else
  BUILD    := build/san-$(subst $(comma),-,$(SANITIZER))
  BIN      := $(BUILD)/attention-server
  OPT      := -O1 -g -fno-omit-frame-pointer
  SANFLAGS := -fsanitize=$(SANITIZER) -fno-sanitize-recover=all
endif

WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wformat=2 -Wno-format-nonliteral
ifneq ($(CI),)
  WARN   += -Werror
endif
CFLAGS   ?=
# The layering, enforced by the build: core/ is compiled with its own headers
# only, so a server/ header included there fails to compile (make lint also
# refuses a path into server/); the daemon, tests and benchmarks see both.
CPPFLAGS += -D_GNU_SOURCE -DATTN_VERSION='"$(VERSION)"' -Icore
SERVER_CPPFLAGS := -Iserver -I$(BUILD)/gen
ALLCFLAGS = -std=c11 $(OPT) -g $(WARN) $(SANFLAGS) $(CFLAGS) -pthread
LDLIBS_CORE   := -lopenblas -lm -pthread
LDLIBS_SERVER := -lmicrohttpd -ljansson -lz $(LDLIBS_CORE)
LDLIBS_TEST   := -lcurl $(LDLIBS_SERVER)

CORE_SRC   := $(wildcard core/*.c)
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c))
CORE_OBJ   := $(CORE_SRC:%.c=$(BUILD)/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/assets.o
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
INTEG_SRC  := $(wildcard tests/integration/test_*.c)
INTEG_BIN  := $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tests/%)
BENCH_SRC  := $(wildcard tests/bench/bench_*.c)
BENCH_BIN  := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)
ASSETS     := $(wildcard web/*) docs/openapi.yaml

# Debian packages: to build and run, and in addition to test.
PKGS_RUN  := gcc make pkg-config libc6-dev libmicrohttpd-dev libjansson-dev libopenblas-dev zlib1g-dev
PKGS_TEST := libcurl4-openssl-dev python3-torch python3-numpy curl prometheus bc
PKGS_BENCH := wrk hyperfine
PKGS_LB   := nginx-light wrk
PKGS_FUZZ := clang-14 libclang-rt-14-dev
PKGS_CONTAINER := podman runc debootstrap

.PHONY: all run test unit integration golden test-torch test-export bench load fuzz image compose \
        test-container test-scaleout clean install uninstall help deps deps-test lint \
        format format-check check-sanitizers asan tsan valgrind

all: $(BIN) ## build bin/attention-server

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 22

# ---------------------------------------------------------------- packages
# Installs what is missing: as root directly, else through sudo, else says
# the one apt-get line to run. $(2): more apt-get options.
define need_pkgs
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) $$missing >/dev/null; \
	  elif command -v sudo >/dev/null; then sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) $$missing >/dev/null; \
	  else echo "please run: apt-get install -y $(2) $$missing" >&2; exit 1; fi; \
	fi
endef

# The README's two commands install without Recommends: python3-torch's
# alone would bring systemd, GTK, Qt, libtorch-dev and a node exporter
# (about 290 packages more) that nothing here uses, and on a fresh root the
# install takes 108 s instead of 171 (CI's fresh-setup stage runs with
# exactly this). Tools installed for other targets keep apt's default.
APT_LEAN := --no-install-recommends

deps: ## install the Debian packages needed to build and run
	$(call need_pkgs,$(PKGS_RUN),$(APT_LEAN))

deps-test: deps ## install the Debian packages the tests need
	$(call need_pkgs,$(PKGS_TEST),$(APT_LEAN))

# ------------------------------------------------------------------ build
$(BUILD)/%.o: %.c $(wildcard core/*.h server/*.h tests/*.h) | deps-once
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) -c $< -o $@

# The engine's vector kernels (exp, axpy, the clamp in exp) need two GCC
# flags to compile to straight-line SIMD: contraction of a*b+c into FMA (the
# -std=gnu11 default; ISO -std=c11 turns it off) and no FP-trap semantics (we
# never enable traps; with them GCC leaves float selects as branches). Only
# for the forward pass's files (core/vec.h): numfmt.c's float formatting
# relies on unfused arithmetic.
$(BUILD)/core/attention.o $(BUILD)/core/vec.o $(BUILD)/core/topk.o: ALLCFLAGS += -ffp-contract=fast -fno-trapping-math

$(SERVER_OBJ) $(BUILD)/server/main.o: CPPFLAGS += $(SERVER_CPPFLAGS)

# deps-once: run the package check once per make invocation, not per file.
.PHONY: deps-once
deps-once:
	@[ -n "$(SKIP_DEPS)" ] || $(MAKE) --no-print-directory deps SKIP_DEPS=1 >/dev/null

$(BUILD)/libattn.a: $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(BUILD)/libserver.a: $(SERVER_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(BUILD)/tools/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c11 -Wall $< -o $@

$(BUILD)/gen/assets.c: $(BUILD)/tools/embed $(ASSETS)
	@mkdir -p $(dir $@)
	$(BUILD)/tools/embed $(ASSETS) > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/assets.o: $(BUILD)/gen/assets.c
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) -c $< -o $@

$(BIN): $(BUILD)/server/main.o $(BUILD)/libserver.a $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $^ $(LDLIBS_SERVER) -o $@

$(BUILD)/tests/test_%: tests/unit/test_%.c $(BUILD)/libserver.a $(BUILD)/libattn.a tests/unit/check.h tests/unit/topk_check.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(SERVER_CPPFLAGS) -Itests/unit $(ALLCFLAGS) $< $(BUILD)/libserver.a $(BUILD)/libattn.a $(LDLIBS_TEST) -o $@

$(BUILD)/tests/test_%: tests/integration/test_%.c tests/integration/harness.h tests/integration/rawsock.h $(BUILD)/libserver.a $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(SERVER_CPPFLAGS) -Itests/unit -Itests/integration $(ALLCFLAGS) $< $(BUILD)/libserver.a $(BUILD)/libattn.a $(LDLIBS_TEST) -o $@

$(BUILD)/bench/bench_%: tests/bench/bench_%.c $(wildcard tests/bench/*.h) $(BUILD)/libserver.a $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(SERVER_CPPFLAGS) -Itests/unit $(ALLCFLAGS) $< $(BUILD)/libserver.a $(BUILD)/libattn.a $(LDLIBS_TEST) -o $@

# The README's commands compile on every core: the packages go in first, in
# order (two apt-get runs at once would fight over dpkg's lock), then one
# parallel make of what the command needs (serially it is twice as long on
# two cores: 36 s against 18 for the ThreadSanitizer build). A make already
# given -j passes its own job slots down instead.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
build_par = $(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) \
            --output-sync=target SKIP_DEPS=1 $(1)

# what each command builds, as one goal (no "is up to date" line per file)
.PHONY: build-run build-test
build-run: $(BIN)
	@:
build-test: $(BIN) $(UNIT_BIN) $(INTEG_BIN)
	@:

# ------------------------------------------------------------------- run
run: deps ## build and serve the demo weight set on port 8080
	@$(call build_par,build-run)
	$(BIN) --config config/attention-server.json

# ------------------------------------------------------------------ tests
# Each test binary runs in its own process under a timeout; tests/run-tests
# prints one line per binary and the closing "N passed, N failed" line.
test: deps-test openapi-deps ## every test: unit, PyTorch golden and live (engine and v2), integration over HTTP, the exporter, the OpenAPI document
	@$(call build_par,build-test)
	@ATTN_SANITIZER=$(SANITIZER) ATTN_SERVER_BIN=$(abspath $(BIN)) ATTN_TEST_BUILD=$(BUILD) \
	  tests/run-tests $(UNIT_BIN) tests/unit/other-kernels $(INTEG_BIN) tests/golden/check-live \
	  tests/golden/check-v2 tests/exporter/test_export.py tests/openapi/check-openapi.js

unit: $(UNIT_BIN) ## unit tests only
	@ATTN_SANITIZER=$(SANITIZER) ATTN_TEST_BUILD=$(BUILD) tests/run-tests $(UNIT_BIN) tests/unit/other-kernels

integration: $(BIN) $(INTEG_BIN) ## integration tests only (real daemon, libcurl)
	@ATTN_SANITIZER=$(SANITIZER) ATTN_SERVER_BIN=$(abspath $(BIN)) tests/run-tests $(INTEG_BIN)

golden: deps-test ## regenerate tests/golden/*.safetensors and the demo weights with PyTorch
	$(PY) tests/golden/make_golden.py

test-torch: deps-test $(BUILD)/tests/test_golden ## fresh random cases compared with live PyTorch
	tests/golden/check-live

test-export: deps-test $(BIN) ## tools/export_attention.py: layers of every kind exported, served and compared with PyTorch
	ATTN_SERVER_BIN=$(abspath $(BIN)) tests/exporter/test_export.py

asan: ## the whole suite under AddressSanitizer + UBSan
	$(MAKE) test SANITIZER=address,undefined
tsan: ## the whole suite under ThreadSanitizer
	$(MAKE) test SANITIZER=thread

# ---------------------------------------------------------------- install
install: $(BIN) ## install the binary, config and demo weights under PREFIX (DESTDIR honoured)
	install -Dm755 $(BIN) $(DESTDIR)$(PREFIX)/bin/attention-server
	install -Dm644 config/weights/demo.safetensors $(DESTDIR)$(PREFIX)/share/attention-server/weights/demo.safetensors
	install -Dm644 docs/openapi.yaml $(DESTDIR)$(PREFIX)/share/attention-server/openapi.yaml

uninstall: ## remove what install put there
	rm -f $(DESTDIR)$(PREFIX)/bin/attention-server
	rm -rf $(DESTDIR)$(PREFIX)/share/attention-server

lint: ## core/ must not know HTTP or JSON libraries, nor the daemon
	@! grep -nE '#include *[<"](microhttpd|jansson)\.h' core/*.c core/*.h || { echo "core/ includes an HTTP/JSON header"; exit 1; }
	@! grep -nE '#include *[<"][^>"]*server/' core/*.c core/*.h || { echo "core/ includes a server/ header"; exit 1; }
	@echo "lint ok"

format: ## reformat the engine and daemon sources with clang-format
	$(call need_pkgs,clang-format)
	clang-format -i core/*.[ch] server/*.[ch]

format-check: ## fail if clang-format would change a C source
	$(call need_pkgs,clang-format)
	clang-format --dry-run --Werror core/*.[ch] server/*.[ch]

clean: ## remove build outputs
	rm -rf build bin

-include mk/*.mk
