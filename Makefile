# The one test command (README "Testing"); .ci/run runs exactly `make test`.
GO ?= go

.PHONY: test fmt-check vet race fuzz bench

test: fmt-check vet race

fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l reports unformatted files:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# scripts/with-postgres starts a throwaway PostgreSQL for the store suite
# (or uses SEMA_TEST_POSTGRES when set).
race:
	./scripts/with-postgres $(GO) test -race -count=1 ./...

# Each fuzz target for FUZZTIME (default 60s): make fuzz FUZZTIME=10s
FUZZTIME ?= 60s
fuzz:
	@for t in $$($(GO) test -list '^Fuzz' ./protocol | grep '^Fuzz'); do \
		echo "== $$t"; $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./protocol || exit 1; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./protocol
