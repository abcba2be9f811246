# verifyd — build, test and run targets. Every tool a target needs is
# installed here, into ./bin, at a pinned version from the Go module proxy.

GO          ?= go
BIN         := $(CURDIR)/bin
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)
export CGO_ENABLED ?= 1

.PHONY: all build run test lint vet demo bench lists clean

all: build

# build puts verifyd, verifyctl and mailworld into ./bin.
build:
	mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/... ./bench/cmd/...

# run starts verifyd in the foreground on the embedded defaults (data in
# ./data, API on 127.0.0.1:8080), or on ./verifyd.toml when it exists.
run: build
	@if [ -f verifyd.toml ]; then exec $(BIN)/verifyd -config verifyd.toml; \
	else exec $(BIN)/verifyd; fi

# demo starts the simulated mail world and a verifyd configured for it.
demo: build
	./bench/demo.sh

# bench runs the Go benchmarks of every package, a few rounds each.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 3 -benchtime 1s ./...

# lists refreshes the engine's list data from the npm registry.
lists:
	./probe/lists/update.sh

$(STATICCHECK):
	mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN)/staticcheck $(STATICCHECK)

vet:
	$(GO) vet ./...

lint: vet $(STATICCHECK)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null; git ls-files -o --exclude-standard '*.go' 2>/dev/null)); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(STATICCHECK) ./...

test: lint
	$(GO) test -race -shuffle=on -count=1 ./...

clean:
	rm -rf $(BIN)
