# The README's two commands: `make demo` and `make test`.
SHELL := /usr/bin/env bash
OUT   := _output
BIN   := $(OUT)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.1.0-dev)
LDFLAGS := -X main.version=$(VERSION)
# Integration tests start a real control plane per package; give them time on 2 cores.
TEST_TIMEOUT ?= 60m
# How many control-plane test packages run at once (go test's default is GOMAXPROCS: 2 on CI). The
# packages of test/integration each start a control plane of their own and mostly wait on timers, so more
# of them than cores fit; make test runs the unit packages beside them (hack/test.sh;
# docs/test-times.md has the measurements).
TEST_P ?= 5

.PHONY: all build tools test test-slow test-race-binary unit integration fuzz image lint demo local-up local-down clean

all: build

build: ## the cluster-autoscaler binary in _output/bin
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/cluster-autoscaler ./cluster-autoscaler

tools: ## the local control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, kwok)
	hack/build-tools.sh

test: tools ## unit and integration tests, as CI runs them (make test-slow: the slow ones and the fuzzing)
	TEST_P=$(TEST_P) TEST_TIMEOUT=$(TEST_TIMEOUT) hack/test.sh

# The unit tests under the race detector (make test runs them without: docs/test-times.md, "Without -race"),
# test/integration/timers (its test process runs the loop) and test/integration/scaledown against the binary built
# with -race (make test runs both without: a race build of the module is a compile of its own),
# the slow fault and failover tests (test/integration/faults skips them without INTEGRATION_SLOW), the
# StatefulSet and Job plan-ahead tests' staircase comparisons (test/integration/burst), the AWS
# provider's call counts at 1,000 groups (cloudprovider/aws runs them at 100 groups only without it), the image
# test for both architectures (make test builds the machine's own only: the other is a second compile), the
# fuzzing (each target's build is instrumented: another compile) and a short soak; CI runs this after make test while its time budget allows (.ci/run).
SOAK_CHECK := SOAK_DURATION=2m SOAK_STEP=30s
test-slow: tools ## the unit tests under -race, the slow fault and failover tests, the image of both architectures, the fuzzing and a 2-minute soak
	$(MAKE) unit-race
	INTEGRATION_SLOW=1 go test -race -count=1 -timeout $(TEST_TIMEOUT) ./test/integration/faults/
	AUTOSCALER_TEST_RACE=1 go test -race -vet=off -ldflags='-s -w' -count=1 -p 2 -timeout $(TEST_TIMEOUT) ./test/integration/timers/ ./test/integration/scaledown/
	INTEGRATION_SLOW=1 go test -race -count=1 -run TestAPICallsPerLoop -timeout $(TEST_TIMEOUT) ./cloudprovider/aws/
	INTEGRATION_SLOW=1 go test -count=1 -run 'TestOrderedStatefulSetInOneDecision|TestSteppedJobInOneDecision' -timeout $(TEST_TIMEOUT) ./test/integration/burst/
	IMAGE_TEST_ARCHS= go test -count=1 -timeout $(TEST_TIMEOUT) ./test/image/
	$(MAKE) fuzz
	$(SOAK_CHECK) go test -count=1 -run xxx -bench Soak -benchtime 1x -timeout 15m ./test/integration/bench/

# Every integration package against the binary built with -race (make test-slow runs test/integration/scaledown
# so): a process that reports a data race fails its test.
test-race-binary: tools ## the integration tests with the cluster-autoscaler built with -race
	AUTOSCALER_TEST_RACE=1 go test -count=1 -p $(TEST_P) -timeout $(TEST_TIMEOUT) ./test/integration/...

# Fuzz targets of what servers and users send us: package and target
# (docs/reliability.md, "Fuzzing", says what each checks).
FUZZ_TARGETS := ./expander/grpc:FuzzBestOptionsReply ./cloudprovider/externalgrpc:FuzzDecodeReplies \
	./provreq/processor:FuzzProvisioningRequest ./provreq/processor:FuzzRestoredRecord ./expander:FuzzPriorityConfigMap ./cloudprovider/kwok:FuzzConfig \
	./config:FuzzFlagValues ./cluster-autoscaler:FuzzCommandLine ./simulator/framework:FuzzSchedulerConfigFile \
	./cloudprovider/aws:FuzzDescribeReplies
FUZZ_TIME ?= 10s

fuzz: ## each fuzz target for FUZZ_TIME (their seed corpora also run in go test)
	FUZZ_TIME=$(FUZZ_TIME) hack/fuzz.sh $(FUZZ_TARGETS)

UNIT_PKGS = $$(go list ./... | grep -v -e /test/ -e /provreq/client)

unit: ## unit tests only: the packages that do not start a control plane (as make test builds them)
	CGO_ENABLED=0 go test -trimpath -count=1 $(UNIT_PKGS)

unit-race: ## the unit tests with the race detector (make test-slow runs them)
	go test -race -vet=off -ldflags='-s -w' -count=1 -timeout $(TEST_TIMEOUT) $(UNIT_PKGS)

integration: tools ## integration tests only, against the real local control plane
	go test -race -count=1 -p $(TEST_P) -timeout $(TEST_TIMEOUT) ./test/... ./provreq/client/...

# golangci-lint reads .golangci.yaml (the floors: docs/architecture.md); a
# second run on the machine waits for the first instead of failing.
lint: ## gofmt, go vet and golangci-lint (built from the module proxy)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	cd hack/tools/lint && go build -o ../../../$(BIN)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	$(BIN)/golangci-lint run --allow-serial-runners ./...

image: ## the multi-arch container image (linux/amd64, linux/arm64) as an OCI layout tar: _output/cluster-autoscaler-image.tar (ARCHS, VERSION, IMAGE_OUT)
	hack/build-image.sh

# On a terminal the demo runs as a job of its own in the foreground (bash -m),
# so Ctrl-C reaches the demo alone: it stops cleanly and make exits with its
# status (0) instead of reporting an interrupted recipe (130).
DEMO ?= hack/demo.sh
demo: build ## local control plane + autoscaler + sample workload; Ctrl-C stops it (builds only the tools it runs)
	@if [ -t 0 ]; then TOOLS_SET=demo bash -mc '$(DEMO) & fg %1 >/dev/null'; else TOOLS_SET=demo $(DEMO); fi

local-up: tools ## start the local control plane in _output/local
	hack/local-up.sh

local-down: ## stop the local control plane started by local-up
	hack/local-down.sh

clean:
	-hack/local-down.sh
	rm -rf $(OUT)
