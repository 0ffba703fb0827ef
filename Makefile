# Tools are pinned in tools.mod and run with `go tool -modfile=tools.mod`.
TOOL := go tool -modfile=tools.mod
GENERATED_DIRS := gen internal/gen examples

.PHONY: all generate check-generate lint test bench

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

## test: the test command the README gives.
test:
	go test -race -shuffle=on -count=1 ./...

## bench: run the benchmarks and rewrite BENCHMARKS.md.
bench:
	./scripts/bench.sh
