# Container image, its test, and the compose stack (docker/).
#
#   make image            build attention-server:$(VERSION) and :latest
#   make test-container   build it, run it read-only, check it over HTTP
#   make compose          N replicas behind nginx (docker/compose.yml)
#
# Without a Docker daemon everything runs on podman + runc, with base images
# built locally from Debian packages (docker/build-base-image.sh), because no
# registry may be reachable. docker/containers.conf holds the engine settings
# such hosts need; the scripts point CONTAINERS_CONF at it.

IMAGE_NAME       ?= attention-server
IMAGE_TAGS       := $(IMAGE_NAME):$(VERSION) $(IMAGE_NAME):latest
CONTAINERS_CONF  ?= $(abspath docker/containers.conf)
export CONTAINERS_CONF

# docker when a Docker daemon answers, else podman. Deferred and computed at
# most once, so that other targets never pay for the `docker info` probe.
ifndef CONTAINER_ENGINE
CONTAINER_ENGINE = $(eval CONTAINER_ENGINE := $(if $(shell command -v docker >/dev/null && docker info >/dev/null 2>&1 && echo y),docker,podman))$(CONTAINER_ENGINE)
endif

.PHONY: container-deps compose-down

# podman, runc, debootstrap (and podman-compose) when podman is the engine.
container-deps:
	$(if $(filter podman,$(CONTAINER_ENGINE)),$(call need_pkgs,$(PKGS_CONTAINER)),@true)

image: container-deps ## build the container image (podman build, or docker build where a daemon runs)
	CONTAINER_ENGINE=$(CONTAINER_ENGINE) docker/build-image.sh $(IMAGE_TAGS)

test-container: ## build the image, run it read-only as non-root, check health, /attend numbers, stop
	$(call need_pkgs,$(PKGS_CONTAINER) curl)
	IMAGE=$(IMAGE_NAME):latest tests/container/test-container.sh

# podman-compose 1.0.3 ignores the file's top-level name: give it with -p.
COMPOSE_PODMAN := podman-compose -p attention-server -f docker/compose.yml

compose: container-deps ## start N replicas (ATTN_REPLICAS, default 3) behind nginx on 127.0.0.1:8080 (ATTN_LB_PUBLISH)
	@if [ "$(CONTAINER_ENGINE)" = docker ] && docker compose version >/dev/null 2>&1; then \
	  docker compose -f docker/compose.yml up -d --build; \
	elif command -v podman-compose >/dev/null; then \
	  docker/build-image.sh $(IMAGE_TAGS) && \
	  $(COMPOSE_PODMAN) up -d && \
	  echo "up: curl -s $${ATTN_LB_PUBLISH:-127.0.0.1:8080}/readyz   stop: make compose-down"; \
	else \
	  echo "make compose needs 'docker compose' or podman-compose (apt-get install -y podman-compose)."; \
	  echo "Or run the stack by hand: see docs/OPERATIONS.md, section 'Compose'."; \
	fi

compose-down: ## stop and remove the compose stack
	@if [ "$(CONTAINER_ENGINE)" = docker ] && docker compose version >/dev/null 2>&1; then \
	  docker compose -f docker/compose.yml down; \
	elif command -v podman-compose >/dev/null; then \
	  $(COMPOSE_PODMAN) down && { podman network rm attention-server_default >/dev/null 2>&1 || true; }; \
	fi
