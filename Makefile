# The README's two commands: `make demo` and `make test`.
SHELL := /usr/bin/env bash
OUT   := _output
BIN   := $(OUT)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.1.0-dev)
LDFLAGS := -X main.version=$(VERSION)
# Integration tests start a real control plane per package; give them time on 2 cores.
TEST_TIMEOUT ?= 60m

.PHONY: all build tools test unit integration fuzz image lint demo local-up local-down clean

all: build

build: ## the cluster-autoscaler binary in _output/bin
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/cluster-autoscaler ./cluster-autoscaler

tools: ## the local control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, kwok)
	hack/build-tools.sh

test: tools ## unit and integration tests, as CI runs them, then a short fuzzing run
	go test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) fuzz

# Fuzz targets of what servers and users send us: package and target
# (docs/reliability.md, "Fuzzing", says what each checks).
FUZZ_TARGETS := ./expander/grpc:FuzzBestOptionsReply ./cloudprovider/externalgrpc:FuzzDecodeReplies \
	./provreq/processor:FuzzProvisioningRequest ./provreq/processor:FuzzRestoredRecord ./expander:FuzzPriorityConfigMap ./cloudprovider/kwok:FuzzConfig \
	./config:FuzzFlagValues ./cluster-autoscaler:FuzzCommandLine ./simulator/framework:FuzzSchedulerConfigFile \
	./cloudprovider/aws:FuzzDescribeReplies
FUZZ_TIME ?= 10s

fuzz: ## each fuzz target for FUZZ_TIME (their seed corpora also run in go test)
	FUZZ_TIME=$(FUZZ_TIME) hack/fuzz.sh $(FUZZ_TARGETS)

unit: ## unit tests only: the packages that do not start a control plane
	go test -race -count=1 $$(go list ./... | grep -v -e /test/ -e /provreq/client)

integration: tools ## integration tests only, against the real local control plane
	go test -race -count=1 -timeout $(TEST_TIMEOUT) ./test/... ./provreq/client/...

# golangci-lint reads .golangci.yaml (the floors: docs/architecture.md); a
# second run on the machine waits for the first instead of failing.
lint: ## gofmt, go vet and golangci-lint (built from the module proxy)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	cd hack/tools/lint && go build -o ../../../$(BIN)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	$(BIN)/golangci-lint run --allow-serial-runners ./...

image: ## the container image as an OCI layout tar: _output/cluster-autoscaler-image.tar (ARCH, VERSION, IMAGE_OUT)
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
