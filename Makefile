# edgebase developer targets. `make test` is the whole test suite (what CI runs).

GO          ?= go
GOBIN_DIR   := $(shell $(GO) env GOPATH)/bin
STATICCHECK ?= $(GOBIN_DIR)/staticcheck
IMAGE       ?= edgebase:dev
PROM_IMAGE  ?= edgebase-prometheus:dev
CA_BUNDLE   ?= /etc/ssl/certs/ca-certificates.crt
# Where test-bins puts the binaries the process-level tests run; `make test`
# hands it to them as EDGEBASE_TEST_BIN_DIR (see internal/testbin).
TEST_BIN_DIR := $(CURDIR)/bin/test
# docker-compose (v1) where it is installed, else the compose plugin.
COMPOSE     ?= $(shell if command -v docker-compose >/dev/null 2>&1; then echo docker-compose; else echo docker compose; fi)

.PHONY: build run test test-js test-bins robustness bench image image-prometheus compose-up compose-monitoring compose-down clean

## build: static binary at ./bin/edgebase
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/edgebase ./cmd/edgebase

## run: a single-node development server with a demo project
run:
	$(GO) run ./cmd/edgebase serve --dev

## test: the test binaries (test-bins), vet, staticcheck, every test with the
## race detector, then the 100,000-device push fan-out without it (too slow
## instrumented)
test: test-bins $(STATICCHECK)
	$(GO) vet ./... && $(STATICCHECK) ./... && \
	EDGEBASE_TEST_BIN_DIR=$(TEST_BIN_DIR) $(GO) test -race -count=1 -timeout 20m ./... && \
	$(GO) test -count=1 -run '^TestPushFanOut100k$$' -v ./node

## test-js: the JavaScript SDK's tests alone (clients/js: node --test against a
## real node process, tsc --strict over its types); `make test` runs them too
test-js: test-bins
	EDGEBASE_TEST_BIN_DIR=$(TEST_BIN_DIR) $(GO) test -count=1 -v -run '^(TestNodeSDK|TestTypes)$$' ./clients/js

## test-bins: the edgebase binaries that e2e/process, robustness and the
## docker-compose test run, built once before the tests (not by each package
## while the others compile and run): bin/test/edgebase and
## bin/test/edgebase-brokenreads (robustness's negative test), and
## bin/test/oidcpeer (the OpenID provider of the OAuth tests, its own module),
## bin/test/wanproxy (toxiproxy, the simulated WAN of e2e/wan; its own module)
test-bins:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(TEST_BIN_DIR)/edgebase ./cmd/edgebase
	CGO_ENABLED=0 $(GO) build -trimpath -tags brokenreads -o $(TEST_BIN_DIR)/edgebase-brokenreads ./cmd/edgebase
	CGO_ENABLED=0 GOFLAGS=-mod=mod $(GO) -C e2e/oidcpeer build -trimpath -o $(TEST_BIN_DIR)/oidcpeer .
	CGO_ENABLED=0 GOFLAGS=-mod=mod $(GO) -C e2e/wanproxy build -trimpath -o $(TEST_BIN_DIR)/wanproxy .

# staticcheck, pinned (the same version .ci/run installs), when it is missing.
$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

## robustness: the long profile of the fault-injection suite (5 seeds per fault,
## longer faults; root for partitions and the full disk). CI runs the short one in `make test`.
robustness: test-bins
	EDGEBASE_TEST_BIN_DIR=$(TEST_BIN_DIR) EDGEBASE_ROBUSTNESS=long $(GO) test -count=1 -timeout 90m -v -run 'TestRobustness|TestChecker' ./robustness

## bench: scenario runner; starts its own 1- and 3-node clusters on loopback (see docs/benchmarks.md)
bench:
	$(GO) run ./bench

## image: the FROM scratch image $(IMAGE), from files staged in bin/image/
image:
	rm -rf bin/image
	mkdir -p bin/image/data
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -o bin/image/edgebase ./cmd/edgebase
	cp $(CA_BUNDLE) bin/image/ca-certificates.crt
	chmod 0755 bin/image/edgebase bin/image/data
	chmod 0644 bin/image/ca-certificates.crt
	docker build -t $(IMAGE) .

## compose-up: build the image, then start the 3-voter + 1-edge cluster of docker-compose.yml
compose-up: image
	$(COMPOSE) -f docker-compose.yml up -d

## image-prometheus: the FROM scratch image $(PROM_IMAGE) around the host's
## Prometheus (Debian's package), staged in bin/prometheus-image/
image-prometheus:
	deploy/prometheus/stage-rootfs.sh bin/prometheus-image
	docker build -t $(PROM_IMAGE) -f deploy/prometheus/Dockerfile bin/prometheus-image

## compose-monitoring: compose-up plus Prometheus (profile "monitoring") on 127.0.0.1:19090 (EB_PROM_PORT)
compose-monitoring: image image-prometheus
	$(COMPOSE) -f docker-compose.yml --profile monitoring up -d

## compose-down: stop it (Prometheus too) and delete its volumes
compose-down:
	$(COMPOSE) -f docker-compose.yml --profile monitoring down -v

clean:
	rm -rf bin
