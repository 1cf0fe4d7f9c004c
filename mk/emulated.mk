# `make test-emulated`: the tests whose paths the CPU chooses, on an
# emulated AVX2-only CPU (QEMU's user mode as an AMD EPYC Zen 3), whatever
# CPU this is: tests/unit/emulated-cpu says what runs and why. Not part of
# `make test`, which runs everything on this CPU itself; CI runs both.
test-emulated: deps-test ## the CPU-dependent tests on an emulated AVX2-only CPU (QEMU as an AMD Zen 3)
	$(call need_pkgs,qemu-user,$(APT_LEAN))
	@$(call build_par,build-test)
	@ATTN_SERVER_BIN=$(abspath $(BIN)) ATTN_TEST_BUILD=$(BUILD) TEST_TIMEOUT=900 \
	  tests/run-tests tests/unit/emulated-cpu

.PHONY: test-emulated
