# Tools are pinned in tools.mod and run with `go tool -modfile=tools.mod`.
TOOL := go tool -modfile=tools.mod
GENERATED_DIRS := gen internal/gen examples gatewayidempotency/internal/gen

.PHONY: all generate check-generate check-docs lint test bench

all: generate lint test

## generate: regenerate Go code from proto/ (removes stale files first).
generate:
	find $(GENERATED_DIRS) \( -name '*.pb.go' -o -name '*.pb.gw.go' \) -delete 2>/dev/null || true
	$(TOOL) buf generate

## check-generate: fail when regenerating changes a byte.
check-generate: generate
	@test -z "$$(git status --porcelain -- $(GENERATED_DIRS) proto internal/proto)" || \
		{ git status --porcelain -- $(GENERATED_DIRS); echo "generated code is stale: run make generate"; exit 1; }

## lint: buf lint, gofmt, go vet, staticcheck.
lint:
	$(TOOL) buf lint
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	go vet ./...
	$(TOOL) staticcheck ./...

## check-docs: every proto snippet of the docs builds with buf, and the
## README's examples run when copied into an empty module.
check-docs:
	go run ./internal/cmd/protosnippets $$(find . -name '*.md' -not -path './.git/*' | sed 's|^\./||' | sort)
	./scripts/check-examples.sh

## test: the test command the README gives: first one line per backend
## (Redis, PostgreSQL) saying whether its tests run or skip.
test:
	go run ./internal/cmd/backends && go test -race -shuffle=on -count=1 ./...

## bench: run the benchmarks and rewrite BENCHMARKS.md.
bench:
	./scripts/bench.sh
