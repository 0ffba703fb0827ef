module github.com/grpc-idempotency/idempotency/examples/payments/gen

go 1.26.0

require (
	github.com/grpc-idempotency/idempotency v0.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261026165753-2ffab32bce7e // indirect
)

// Modules of this repository, built from its working tree until they are
// tagged (docs/releasing.md).
replace github.com/grpc-idempotency/idempotency => ../../..
