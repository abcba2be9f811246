# verifyd — build, test and run targets. Every tool a target needs is
# installed here, into ./bin, at a pinned version from the Go module proxy.

GO          ?= go
BIN         := $(CURDIR)/bin
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)
export CGO_ENABLED ?= 1

.PHONY: all build run test lint vet demo bench lists clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

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
