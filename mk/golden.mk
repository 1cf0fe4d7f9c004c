# golden.mk - point tests/golden/check-live at the test binary of this build
# (release or sanitizer), for `make test` and `make test-torch`.
export ATTN_TEST_GOLDEN_BIN ?= $(abspath $(BUILD)/tests/test_golden)
# Under a sanitizer the live cases are fewer (20 of 50): each runs the
# instrumented engine, and test_attention's random cases already drive it
# there; the release run keeps all 50.
ifneq ($(SANITIZER),)
export CHECK_LIVE_N ?= 20
endif
