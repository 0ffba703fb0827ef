// Package admin is the operator's side of an idempotency server: the admin
// gRPC service idempotency.admin.v1.AdminService ([NewService]), which
// looks up, lists, purges and counts the keys of the server's store and
// resolves its abandoned keys (ResolveKey: let the next call run, or
// complete the key with the outcome an operator determined), and
// [Explain], which turns a stored outcome into the form a person reads
// (its gRPC status and details, metadata, and its response as JSON through
// the server's descriptors).
//
// The service is never open by default: [NewService] requires an
// authorization function, which runs before anything else in every call;
// to decide by the scope a request names (an operator limited to some
// tenants), add [WithAuthorizeRequest], which runs before anything is
// read. Register it where only operators reach it, on an admin listener of its
// own, as grpc-go's admin and channelz services are:
//
//	svc := admin.NewService(srv, authorize)
//	adminServer := grpc.NewServer(grpc.Creds(operatorTLS))
//	adminv1.RegisterAdminServiceServer(adminServer, svc)
//
// A server built with [idempotency.WithSealing] stores its outcomes sealed.
// The service opens each with the server's keys, for the scope of the
// client key a request names, or, for a store key (as ListKeys returns
// it), for the request's scope field (none when it is empty), and says
// which key sealed it (the entry's sealed_by), even when it does not open:
// for another scope, or once the keyring no longer holds the key, the
// entry's outcome_error says why. [Explain] has no keys, and reads only
// records stored without sealing.
//
// The idempotency interceptors leave the service's methods alone, as they
// leave gRPC's own services. The guide is
// [Inspecting and repairing keys].
//
// [Inspecting and repairing keys]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/operations.md#inspecting-and-repairing-keys
package admin
