# Browser test of the playground page (web/, served at GET /): Debian's
# Chromium driven by playwright-core from tests/ui (npm, lockfile committed).
# Included by the top Makefile (-include mk/*.mk).

UI_DIR := tests/ui

.PHONY: test-ui ui-deps

ui-deps: ## install Chromium, Node.js and the UI test's npm packages if missing
	$(call need_pkgs,chromium)
	@command -v node >/dev/null && command -v npm >/dev/null || $(MAKE) --no-print-directory ui-node
	@[ -f $(UI_DIR)/node_modules/playwright-core/package.json ] || \
	  (cd $(UI_DIR) && npm ci --no-audit --no-fund --loglevel=error)

.PHONY: ui-node
ui-node:
	$(call need_pkgs,nodejs npm)

test-ui: ui-deps $(BIN) ## browser test of the playground page (headless Chromium, real daemon)
	@ATTN_SERVER_BIN=$(abspath $(BIN)) node $(UI_DIR)/playground.test.js
