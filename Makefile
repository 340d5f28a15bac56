# The one test command (README "Testing"); .ci/run runs exactly `make test`.
GO ?= go

.PHONY: test fmt-check vet cross interop-deps race fuzz bench ratios forward fleet stages sandbox-cost shutdown-fleet soak

test: fmt-check vet cross interop-deps race

fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l reports unformatted files:"; echo "$$out"; exit 1; fi

# The probe build (internal/probe) is vetted, and its marks tested, too.
vet:
	$(GO) vet ./...
	$(GO) vet -tags semaprobe ./internal/probe/ ./lane/... ./executor/... ./bench/...
	$(GO) test -tags semaprobe -count=1 ./internal/probe/

# The other platforms: darwin (arm64, amd64) builds, vets and compiles
# every package's tests; linux/arm64 and linux/386 build. Nothing runs
# there: that needs the machine (docs/fs-ops.md).
cross:
	@for a in arm64 amd64; do \
		echo "== darwin/$$a"; d=$$(mktemp -d); \
		GOOS=darwin GOARCH=$$a $(GO) build ./... && GOOS=darwin GOARCH=$$a $(GO) vet ./... && \
		GOOS=darwin GOARCH=$$a $(GO) test -c -o $$d/ ./... >/dev/null || { rm -rf $$d; exit 1; }; rm -rf $$d; \
	done
	@for p in linux/arm64 linux/386; do echo "== $$p"; GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./... || exit 1; done

# The official TypeScript MCP SDK and the MCP Inspector, for the interop tests of both MCP faces
# (cmd/sema/cli/mcp_interop_test.go), from the npm registry at the version
# package-lock.json pins. With it installed, race requires that test to run.
interop-deps:
	@[ -d e2e/mcpinterop/node_modules/@modelcontextprotocol/sdk ] && [ -d e2e/mcpinterop/node_modules/@modelcontextprotocol/inspector ] || npm ci --prefix e2e/mcpinterop --no-audit --no-fund

# scripts/with-postgres starts a throwaway PostgreSQL for the store suite
# (or uses SEMA_TEST_POSTGRES when set).
race:
	SEMA_REQUIRE_INTEROP=1 ./scripts/with-postgres $(GO) test -race -count=1 ./...

# Every fuzz target of every package, each for FUZZTIME (default 60s):
# make fuzz FUZZTIME=10s
FUZZTIME ?= 60s
fuzz:
	@for p in $$($(GO) list ./...); do \
		for t in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz'); do \
			echo "== $$p $$t"; $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
		done; \
	done

bench:
	./scripts/with-postgres $(GO) test -run '^$$' -bench . -benchmem ./protocol ./lane/... ./nexting/...

# The user's path against ssh, side by side (README "Performance"); not part
# of test. RATIOS passes flags: make ratios RATIOS="-size 256M -rounds 3 -markdown"
RATIOS ?=
ratios:
	$(GO) run ./bench/ratios $(RATIOS)

# What the hop between two replicas costs: two real
# `sema server --postgres` on a throwaway PostgreSQL, a real device on the
# first, the same work through each. make forward FORWARD="-size 256M -rounds 1"
FORWARD ?=
forward:
	./scripts/with-postgres $(GO) run ./bench/forward $(FORWARD)

# A fleet of devices against a real sema server and one real executor:
# lane RSS per device, idle CPU, the burst, exec true.
# make fleet FLEET="-devices 15000 -idle 60s"
FLEET ?= -devices 15000
fleet:
	$(GO) run ./bench/fleet $(FLEET)

# Where an exec true round trip's time goes on the user's path:
# sema built with -tags semaprobe, a real server and device, the
# median of each step. make stages STAGES="-trips 5000"
STAGES ?=
stages:
	$(GO) run -tags semaprobe ./bench/stages $(STAGES)

# What the command sandbox costs on the user's path: exec true round trips
# with --sandbox workspace-write beside --sandbox off, and a developer loop
# inside it. make sandbox-cost SANDBOXCOST="-trips 500 -rounds 4"
SANDBOXCOST ?=
sandbox-cost:
	$(GO) run ./bench/sandboxcost $(SANDBOXCOST)

# 10,000 devices connected from a child process, then Shutdown: every lease
# released in one statement (lane/shutdown_leases_test.go).
shutdown-fleet:
	LANE_SHUTDOWN_FLEET=10000 $(GO) test -count=1 -run '^TestShutdownReleasesTheLeasesOfAFullFleet$$' -v ./lane

# The long runs the test command keeps a slice of (SEMA_SOAK=1): 1 GiB
# through the real HTTP API into a reader that stalls up to 20 s, 20 times;
# a 1 GiB streamed upload with the process RSS sampled.
soak:
	SEMA_SOAK=1 $(GO) test -count=1 -timeout 3h -run '^TestAStallingHTTPReaderGetsEveryByteAndNoCancel$$' -v ./e2e
	SEMA_SOAK=1 $(GO) test -count=1 -timeout 30m -run '^TestStreamedUploadSoak$$' -v ./executor
