# golden.mk - point tests/golden/check-live at the test binary of this build
# (release or sanitizer), for `make test` and `make test-torch`.
export ATTN_TEST_GOLDEN_BIN ?= $(abspath $(BUILD)/tests/test_golden)
# Under a sanitizer the live cases are fewer (20 of 50) and the long-context
# one has 1,024 queries instead of 2,048 (still four key blocks): each runs
# the instrumented engine and its naive reference, and test_attention's
# random cases already drive it there; the release run keeps all 50 at 2,048.
ifneq ($(SANITIZER),)
export CHECK_LIVE_N ?= 20
export CHECK_LIVE_LONG_N ?= 1024
endif
