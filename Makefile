# testcontainers-go: use loopback (it would dial the default gateway where it believes
# it runs in a container) and no Ryuk (its image cannot always be pulled; containers
# are removed by the code that starts them).
export TESTCONTAINERS_HOST_OVERRIDE ?= 127.0.0.1
export TESTCONTAINERS_RYUK_DISABLED ?= true
export PATH := $(PATH):/usr/local/go/bin
# One set of build flags for run, test, the image and the binaries the tests build: the
# shipped binary's (static, paths trimmed). The build cache is then shared, and a fresh
# machine compiles the dependencies once instead of once per flag set (a cold compile of
# cmd/sensorapi takes 3-4 min on 2 cores: docs/testing.md).
export CGO_ENABLED ?= 0
export GOFLAGS ?= -trimpath

GO ?= go
BIN := bin/sensorapi

.PHONY: run reset build test test-race test-ha test-tools console-deps prepare vet lint lint-openapi bench bench-bulkold bench-tiers bench-sql bench-import bench-csv bench-storage bench-fleet bench-mqtt fuzz fuzz-short loadtest image clean

## run: build and serve on :8080 (starts TimescaleDB itself without DATABASE_URL: the
## container $(DATA_VOLUME), stopped on exit and started again next time, with its data
## in the Docker volume $(DATA_VOLUME))
## make run's binary is a development build (-tags dev): only it can start a database
## container; make build, make image and the binary that ships contain no Docker code.
DATA_VOLUME ?= sensorapi-data
DEV_BIN := bin/sensorapi-dev
run: prepare
	$(GO) build -tags dev -o $(DEV_BIN) ./cmd/sensorapi
	SENSORAPI_DATA_VOLUME=$(DATA_VOLUME) ./$(DEV_BIN) serve

## reset: delete make run's database (its container and volume) and its saved admin
## token, after asking (FORCE=1: without asking)
reset:
	@if [ "$(FORCE)" != 1 ]; then printf 'Delete the container and volume $(DATA_VOLUME) (every device and value of make run) and its admin token? [y/N] '; \
	  read answer; [ "$$answer" = y ] || { echo "kept"; exit 1; }; fi
	@if docker container inspect $(DATA_VOLUME) >/dev/null 2>&1; then docker rm -f $(DATA_VOLUME); fi
	docker volume rm -f $(DATA_VOLUME)
	rm -f "$${XDG_CONFIG_HOME:-$$HOME/.config}/sensorapi/admin-token"

build:
	$(GO) build -o $(BIN) ./cmd/sensorapi

## prepare: make sure Docker answers and a TimescaleDB image exists
prepare:
	@if [ -z "$$DATABASE_URL$$TEST_DATABASE_URL" ]; then $(GO) run ./testcontainers/prepare; fi

## vet: go vet (both build configurations) and the gofmt check, for a quick look before
## a commit; make lint runs the same analyzers (golangci-lint's govet and gofmt) and more,
## so make test does not run it again (on a fresh machine it cost make test ~90 s)
vet:
	$(GO) vet ./...
	$(GO) vet -tags dev ./cmd/sensorapi
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

## lint: golangci-lint at a pinned version, built from the Go module proxy into bin/tools
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := bin/tools/golangci-lint
$(GOLANGCI_LINT):
	GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
lint: $(GOLANGCI_LINT)
	@$(GOLANGCI_LINT) version | grep -q "$(GOLANGCI_LINT_VERSION:v%=%)" || GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	$(GOLANGCI_LINT) run ./...
	$(GOLANGCI_LINT) run --build-tags dev ./cmd/sensorapi

## lint-openapi: Redocly CLI's recommended rules on docs/openapi.yaml (redocly.yaml turns
## off, with reasons, the ones the contract breaks on purpose); needs node and npm, and
## installs the pinned CLI into build/tools (.ci/node-tools). No telemetry.
REDOCLY := build/tools/node_modules/.bin/redocly
lint-openapi:
	@.ci/node-tools
	@test -x $(REDOCLY) || { echo "lint-openapi: needs node and npm"; exit 1; }
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(REDOCLY) lint docs/openapi.yaml

## test-tools: the real clients the tests drive (mosquitto-clients, chromium), installed
## when missing, and Prism for the OpenAPI contract test when node is present
test-tools:
	@.ci/test-tools

## test: every test against a real TimescaleDB; then the load tests (a disk filled,
## faults between service and database) alone, one package at a time, so that they do
## not starve the timing-bound tests of the packages running beside them
LOAD_TESTS := ^(TestFullDiskBudgetStopsWrites|TestFullDiskWithoutBudget|TestTCPFaults)$$
## (GOTESTFLAGS: more go test flags, e.g. -json to see where the time goes)
GOTESTFLAGS ?=
## The packages whose tests take longest are named first: go test starts packages in the
## order given (two at a time on 2 cores), so the short ones fill the end instead of a
## long one running alone there (docs/testing.md); ./... adds every other package.
TEST_LONGEST := ./pkg/api ./cmd/sensorapi ./pkg/synthetic ./pkg/mqtt ./pkg/values ./pkg/console ./pkg/sqlrole ./testcontainers/sensorapi
## Test binaries are linked without DWARF (-w: stack traces stay whole; a debugger
## builds its own): a quarter less linker CPU, on the ~45 binaries make test links.
## Compiling is unaffected, so the build cache stays shared with make run.
TEST_LDFLAGS := -ldflags=-w
## On a fresh machine prepare (dockerd, the image) and test-tools (apt-get, npm) wait
## minutes on the network and the disk: the tests compile meanwhile (go list -export
## builds packages and test packages into the build cache, linking nothing), once
## prepare itself is compiled. What is left when they are done, go test compiles as
## it runs the first packages.
test:
	@$(GO) build -o /dev/null ./testcontainers/prepare
	@$(GO) list -test -export -deps $(TEST_LONGEST) ./... >/dev/null 2>&1 & precompile=$$!; \
	  $(MAKE) --no-print-directory prepare test-tools; rc=$$?; kill $$precompile 2>/dev/null; wait $$precompile; exit $$rc
	$(GO) test -count=1 -timeout 20m -parallel 4 $(TEST_LDFLAGS) $(GOTESTFLAGS) $(TEST_LONGEST) ./...
	SENSORAPI_TEST_LOAD=1 $(GO) test -count=1 -timeout 10m -p 1 $(TEST_LDFLAGS) $(GOTESTFLAGS) -run '$(LOAD_TESTS)' ./pkg/api ./pkg/mqtt

## test-race: the tests of code whose goroutines share state, under the race detector:
## the shutdown (issue 46: an instance's goroutines against the closing of its pool) and
## a history import's tiler (its COPY fed from the import's). The detector needs cgo,
## and its build recompiles every dependency: a step of its own after make test
## (.ci/run), outside make test's time budget. Its build shares no cache with the
## others: flags overridden.
RACE_TESTS := ^(TestStopWaitsForEveryGoroutine|TestImportTilesBesideTheUpsert)$$
test-race: prepare
	CGO_ENABLED=1 GOFLAGS= $(GO) test -race -count=1 $(GOTESTFLAGS) -run '$(RACE_TESTS)' ./pkg/server ./pkg/values

## test-ha: the failover test alone (issue 30, docs/scaling.md): etcd and two
## Patroni-managed TimescaleDB nodes (image sensorapi/patroni:pg17-local, built once from
## Debian packages); the primary is killed under HTTP and MQTT writers FAILOVERS times
## (default 2: each node once), and each unavailability is printed with their p50
FAILOVERS ?= 2
test-ha:
	$(GO) run ./testcontainers/prepare -ha
	SENSORAPI_TEST_HA=1 SENSORAPI_FAILOVERS=$(FAILOVERS) $(GO) test -count=1 -timeout 20m -v -run '^TestFailover$$' ./pkg/store

## bench: ingestion, statistics, resample and the CSV export through the real server, next
## to their floors, and the tiers workload (bench-tiers)
bench: prepare
	$(GO) run ./cmd/sensorbench

## bench-bulkold: issue 46's bulk collections of months-old data (days not packed, and
## into packed days) next to one connection's unnest upsert of the same dots, and the
## same upserts from 16 connections (the database's ceiling); also in bench
bench-bulkold: prepare
	$(GO) run ./cmd/sensorbench -only bulkold

## bench-tiers: issue 17's analytics cases over a week of 100 variables and a year of one
## at 10 s (written with sensorapi load), next to hand-written SQL over the raw values,
## and the rollup tiers' size on disk per raw point
bench-tiers: prepare
	$(GO) run ./cmd/sensorbench -only tiers

## bench-sql: issue 44's operator queries through the sensor views as an account's SQL role
## (a month by hour on rows and packed days, a year of daily means) next to the internal tables
bench-sql: prepare
	$(GO) run ./cmd/sensorbench -only sql

## bench-storage: issue 32's six kinds of series over 90 days, bytes per point as rows and
## packed (per kind, per table, database growth), pack throughput; then bench-tiers,
## whose cases run again on packed days
bench-storage: prepare
	$(GO) run ./cmd/sensorbench -only storage
	$(GO) run ./cmd/sensorbench -only tiers

## bench-csv: issue 43's CSV export of every value of one variable (CSV_POINTS, default
## 10 M) through HTTP, next to psql's \copy of the same rows inside the database container,
## and the server's memory growth meanwhile (make bench runs it on the analytics series)
CSV_POINTS ?= 10000000
bench-csv: prepare
	$(GO) run ./cmd/sensorbench -only csv -csv-points $(CSV_POINTS)

## bench-fleet: thousands of devices sending one small message each, through HTTP,
## next to one transaction per message over plain pgx connections (the floor)
bench-fleet: prepare
	$(GO) run ./cmd/sensorbench -only fleet

## bench-import: the history import of 10 M rows of one variable (CSV over HTTP) next to
## COPY + one INSERT … ON CONFLICT into a plain hypertable, and the server's peak RSS
bench-import: prepare
	$(GO) run ./cmd/sensorbench -only import

## bench-mqtt: the same fleet over MQTT (64 paho connections, QoS 1), next to the same
## floor, and the server's memory with 1,000 idle connections
bench-mqtt: prepare
	$(GO) run ./cmd/sensorbench -only mqtt

## loadtest: concurrent clients mixing ingestion, reads, statistics and resample against
## the real server for LOADTEST_FLAGS (default 60 s, 32 clients); exit 1 on any error
LOADTEST_FLAGS ?=
loadtest: prepare
	$(GO) run ./cmd/sensorload $(LOADTEST_FLAGS)

## fuzz: run every fuzz target for FUZZTIME each (seed corpora run in make test);
## fuzz-short: 5 s each, for CI
FUZZTIME ?= 30s
fuzz:
	GO=$(GO) .ci/fuzz $(FUZZTIME)
fuzz-short:
	GO=$(GO) .ci/fuzz 5s

## image: the service image (FROM scratch around the static binary; nothing to pull)
IMAGE ?= sensorapi:latest
image:
	$(GO) run ./testcontainers/sensorapi/buildimage $(IMAGE)

## console-deps: refresh the console's vendored uPlot from the npm registry (needs npm;
## go build and make test never do)
UPLOT_VERSION ?= 1.6.32
console-deps:
	rm -rf build/uplot && mkdir -p build/uplot
	cd build/uplot && npm pack uplot@$(UPLOT_VERSION) >/dev/null && tar xzf uplot-$(UPLOT_VERSION).tgz
	cp build/uplot/package/dist/uPlot.esm.js build/uplot/package/dist/uPlot.min.css build/uplot/package/LICENSE pkg/console/static/vendor/uplot/
	echo "uplot $(UPLOT_VERSION) from the npm registry (make console-deps refreshes it)" > pkg/console/static/vendor/uplot/VERSION

clean:
	rm -rf bin build
