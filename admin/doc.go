// Package admin is the operator's side of an idempotency server: the admin
// gRPC service idempotency.admin.v1.AdminService ([NewService]), which
// looks up, lists, purges and counts the keys of the server's store, and
// [Explain], which turns a stored outcome into the form a person reads
// (its gRPC status and details, metadata, and its response as JSON through
// the server's descriptors).
//
// The service is never open by default: [NewService] requires an
// authorization function, which runs before anything else in every call.
// Register it where only operators reach it, on an admin listener of its
// own, as grpc-go's admin and channelz services are:
//
//	svc := admin.NewService(srv, authorize)
//	adminServer := grpc.NewServer(grpc.Creds(operatorTLS))
//	adminv1.RegisterAdminServiceServer(adminServer, svc)
//
// The idempotency interceptors leave the service's methods alone, as they
// leave gRPC's own services. The guide is
// [Inspecting and repairing keys].
//
// [Inspecting and repairing keys]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/operations.md#inspecting-and-repairing-keys
package admin
