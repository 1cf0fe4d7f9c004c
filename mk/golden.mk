# golden.mk - point tests/golden/check-live at the test binary of this build
# (release or sanitizer), for `make test` and `make test-torch`.
export ATTN_TEST_GOLDEN_BIN ?= $(abspath $(BUILD)/tests/test_golden)
