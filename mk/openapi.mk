# The OpenAPI document (docs/openapi.yaml, served at GET /openapi.yaml)
# checked by a real OpenAPI 3 validator: @apidevtools/swagger-parser from npm,
# pinned by the lockfile committed in tests/openapi, run by
# tests/openapi/check-openapi.js, which also checks that the document lists
# every route of both APIs. No server is started. `make test` runs it.
# Included by the top Makefile (-include mk/*.mk).

OPENAPI_DIR   := tests/openapi
OPENAPI_STAMP := $(OPENAPI_DIR)/node_modules/.installed

.PHONY: test-openapi openapi-deps openapi-node

test-openapi: openapi-deps ## validate docs/openapi.yaml and check that it documents every route
	@tests/run-tests $(OPENAPI_DIR)/check-openapi.js

openapi-deps: $(OPENAPI_STAMP) ## install Node.js and the OpenAPI validator's npm packages if missing

# Node.js from Debian unless one is on PATH already (a nodesource build
# carries its own npm, which Debian's npm package would conflict with).
$(OPENAPI_STAMP): $(OPENAPI_DIR)/package.json $(OPENAPI_DIR)/package-lock.json
	@command -v node >/dev/null && command -v npm >/dev/null || $(MAKE) --no-print-directory openapi-node
	cd $(OPENAPI_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

openapi-node:
	$(call need_pkgs,nodejs npm,$(APT_LEAN))
