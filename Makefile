# Tools are pinned in tools.mod and run with `go tool -modfile=tools.mod`,
# outside workspace mode (the go command refuses -modfile with a go.work).
TOOL := GOWORK=off go tool -modfile=tools.mod
# The directory of every module of the repository, as go.work lists them.
# `go test ./...` at the root covers the root module only, even in workspace
# mode; the go commands below name each module's ./... instead.
MODULES := $(shell go list -m -f '{{.Dir}}')
GENERATED_DIRS := gen internal/gen examples internal/test/gatewaytest/gen internal/test/connecttest/gen watermillidempotency/internal/gen
PROTO_DIRS := proto internal/proto watermillidempotency/internal/proto

.PHONY: all generate check-generate check-docs check-core-deps lint test bench

all: generate lint test

## generate: regenerate Go code from proto/ (removes stale files first).
generate:
	find $(GENERATED_DIRS) \( -name '*.pb.go' -o -name '*.pb.gw.go' -o -name '*.connect.go' \) -delete 2>/dev/null || true
	$(TOOL) buf generate

## check-generate: fail when regenerating changes a byte.
check-generate: generate
	@test -z "$$(git status --porcelain -- $(GENERATED_DIRS) $(PROTO_DIRS))" || \
		{ git status --porcelain -- $(GENERATED_DIRS); echo "generated code is stale: run make generate"; exit 1; }

## lint: buf lint, gofmt, no merge conflict markers, no module but the core importing the
## core's internal packages outside its tests, then go vet and staticcheck in every module,
## each built on its own (GOWORK=off: its go.mod and replace directives alone).
lint:
	$(TOOL) buf lint
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	@! git grep -nE '^(<<<<<<<|>>>>>>>)( |$$)' -- . || { echo "merge conflict markers left in the files above"; exit 1; }
	./scripts/check-internal-imports.sh
	@for m in $(MODULES); do \
		echo "go vet, staticcheck: .$${m#$(CURDIR)}"; \
		(cd $$m && GOWORK=off go vet ./... && GOWORK=off go tool -modfile=$(CURDIR)/tools.mod staticcheck ./...) || exit 1; \
	done

## check-core-deps: fail when the core module requires more than grpc,
## protobuf and the few small modules the core needs.
check-core-deps:
	./scripts/check-core-deps.sh

## check-docs: every proto snippet of the docs builds with buf (run with
## GOWORK=off, as it runs buf from tools.mod), every whole Go snippet builds
## and passes go vet in the workspace and every other one is whole
## statements, the README's examples run
## when copied into an empty module, the README's quickstart runs as written
## (fetching options.proto from the module cache, buf generate, go run), and
## every relative link between the Markdown files, and every link of the Go
## files to the repository's files (docs/semantics/<topic>.md#decision-N),
## resolves, anchors included.
check-docs:
	GOWORK=off go run ./internal/tools/protosnippets $$(find . -name '*.md' -not -path './.git/*' | sed 's|^\./||' | sort)
	go run ./internal/tools/gosnippets $$(find . -name '*.md' -not -path './.git/*' | sed 's|^\./||' | sort)
	./scripts/check-examples.sh
	./scripts/check-quickstart.sh
	./scripts/check-links.sh

## test: the test command the README gives: first one line per backend
## (Redis, PostgreSQL) saying whether its tests run or skip, then the tests
## of every module of go.work.
test:
	go run ./internal/tools/backends && go test -race -shuffle=on -count=1 $$(go list -m -f '{{.Dir}}/...')

## bench: run the benchmarks and rewrite BENCHMARKS.md.
bench:
	./scripts/bench.sh
