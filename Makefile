# Tools are pinned in tools.mod and run with `go tool -modfile=tools.mod`,
# outside workspace mode (the go command refuses -modfile with a go.work).
TOOL := GOWORK=off go tool -modfile=tools.mod
# The directory of every module of the repository, as go.work lists them.
# `go test ./...` at the root covers the root module only, even in workspace
# mode; the go commands below name each module's ./... instead.
MODULES := $(shell go list -m -f '{{.Dir}}')
# What buf generate writes, wherever it is: a new proto module's code needs
# no entry here. The directories buf reads are buf.yaml's modules.
GENERATED := '*.pb.go' '*.pb.gw.go' '*.connect.go'
PROTO_DIRS := $(shell sed -n 's/^  - path: //p' buf.yaml)

# Each target has a line `## target: what it does.` above it, which
# `make help` prints; more about it goes in plain comments below that line.

.PHONY: all help generate check-generate check-docs check-core-deps lint test bench bench-floor model release-rehearsal

## all: generate, lint and test.
all: generate lint test

## help: list the targets, each with its one-line description (this list).
help:
	@awk '/^## [A-Za-z0-9_.-]+: / { name = $$2; sub(/:$$/, "", name); text = $$0; sub(/^## [A-Za-z0-9_.-]+: /, "", text); desc[name] = text } \
		/^[A-Za-z0-9][A-Za-z0-9_.-]*:([^=]|$$)/ { t = $$1; sub(/:.*/, "", t); order[++n] = t } \
		END { for (i = 1; i <= n; i++) { if (!(order[i] in desc)) { print "make help: target " order[i] " has no \"## " order[i] ": ...\" line" > "/dev/stderr"; bad = 1 } else printf "  %-16s %s\n", order[i], desc[order[i]] } exit bad }' $(firstword $(MAKEFILE_LIST))

## generate: regenerate the Go code of every proto module of buf.yaml (removes stale files first).
generate:
	git ls-files -z --cached --others --exclude-standard -- $(GENERATED) | xargs -0 rm -f
	$(TOOL) buf generate

## check-generate: fail when regenerating changes a byte.
# A generated file that is new, gone or changed anywhere in the tree counts.
check-generate: generate
	@test -z "$$(git status --porcelain -- $(GENERATED) $(PROTO_DIRS))" || \
		{ git status --porcelain -- $(GENERATED) $(PROTO_DIRS); echo "generated code is stale: run make generate"; exit 1; }

## lint: buf lint, gofmt, conflict markers, internal imports, go vet per module, then golangci-lint.
# No module but the core may import the core's internal packages outside its
# tests. go vet runs in every module built on its own (GOWORK=off: its go.mod
# and replace directives alone, test files included), then one golangci-lint
# run (.golangci.yml: go vet's analyzers, staticcheck and the other linters
# listed there) over all the modules of go.work. One run in the workspace
# rather than one per module with GOWORK=off: each per-module run analyses the
# core and the shared dependencies again (5.5 min against 1 min on 2 cores,
# cold cache); the go vet loop keeps the check that each module builds on its
# own. golangci-lint runs as the binary `go tool -n` names: `go tool -modfile`
# needs GOWORK=off, which it would inherit.
lint:
	$(TOOL) buf lint
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	@! git grep -nE '^(<<<<<<<|>>>>>>>)( |$$)' -- . || { echo "merge conflict markers left in the files above"; exit 1; }
	./scripts/check-internal-imports.sh
	@for m in $(MODULES); do \
		echo "go vet: .$${m#$(CURDIR)}"; \
		(cd $$m && GOWORK=off go vet ./...) || exit 1; \
	done
	$(TOOL) golangci-lint version
	$$($(TOOL) -n golangci-lint) run -c .golangci.yml $(addsuffix /...,$(MODULES))

## check-core-deps: fail when the core module requires more than grpc, protobuf and a few small modules, or a published module requires an unpublished one.
check-core-deps:
	./scripts/check-core-deps.sh
	./scripts/check-published-requires.sh

## check-docs: the docs' proto and Go snippets build, the README's examples and quickstart run, links and module tables agree.
# Every proto snippet of the docs builds with buf (run with GOWORK=off, as it
# runs buf from tools.mod), every whole Go snippet builds and passes go vet
# in the workspace and every other one is whole statements, the README's
# examples run when copied into an empty module, the README's quickstart
# runs as written (fetching options.proto from the module cache, buf
# generate, go run), and every relative link between the Markdown files, and
# every link of the Go files to the repository's files
# (docs/semantics/<topic>.md#decision-N), resolves, anchors included; and
# the modules tables of docs/releasing.md and the README name every module of
# go.work (scripts/check-modules-listed.sh).
check-docs:
	GOWORK=off go run ./internal/tools/protosnippets $$(find . -name '*.md' -not -path './.git/*' | sed 's|^\./||' | sort)
	go run ./internal/tools/gosnippets $$(find . -name '*.md' -not -path './.git/*' | sed 's|^\./||' | sort)
	./scripts/check-examples.sh
	./scripts/check-quickstart.sh
	./scripts/check-links.sh
	./scripts/check-modules-listed.sh

## test: the README's test command: one line per backend (runs or skips), then every module's tests.
# First one line per backend (Redis, PostgreSQL, RabbitMQ, MySQL) saying
# whether its tests run or skip, then the tests of every module of go.work.
test:
	go run ./internal/tools/backends && go test -race -shuffle=on -count=1 $$(go list -m -f '{{.Dir}}/...')

## bench: run the benchmarks and rewrite BENCHMARKS.md (scripts/bench.sh).
bench:
	./scripts/bench.sh

## bench-floor: run every store's rows beside its floor and print the ratios (scripts/floor-ratios.sh).
bench-floor:
	./scripts/floor-ratios.sh

## model: check the Promela model of the protocol with Spin, and that it catches each known bad variant (scripts/check-model.sh).
# Every property under each abandon policy, then each mutant, with the
# states and the time of each run (model/README.md); MODEL_DEEP=1 checks
# 3 calls under every policy.
model:
	./scripts/check-model.sh

## release-rehearsal: tag every published module in a scratch clone, serve the tags from a local module proxy, use each as a new user would (scripts/release.sh).
# docs/releasing.md has the phases; nothing is pushed, and the clone, the
# proxy and what the run added to the module cache are removed at the end.
release-rehearsal:
	./scripts/release.sh
