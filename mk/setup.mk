# `make test-setup`: the README's two commands on a clean Debian 12 root file
# system (a debootstrap'd image run with podman); see tests/setup/.
test-setup: ## prove `make run` and `make test` on a fresh Debian 12 root (container)
	$(call need_pkgs,$(PKGS_CONTAINER))
	tests/setup/test-fresh-setup.sh

.PHONY: test-setup
