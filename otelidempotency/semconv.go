package otelidempotency

import (
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	oldsemconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// semconvMode is the form of the rpc.* attributes. It follows otelgrpc's
// reading of OTEL_SEMCONV_STABILITY_OPT_IN, so that our attributes name a
// method exactly as otelgrpc's spans and metrics in the same process do.
type semconvMode int

const (
	semconvNew semconvMode = iota // rpc.system.name, rpc.method = "pkg.Service/Method"
	semconvOld                    // rpc.system, rpc.service, rpc.method = "Method"
	semconvDup                    // both; the fully qualified rpc.method wins
)

// semconvModeFromEnv reads OTEL_SEMCONV_STABILITY_OPT_IN as otelgrpc does:
// "rpc/dup" or "rpc/old" among its comma-separated values, else the new
// conventions.
func semconvModeFromEnv() semconvMode {
	return semconvModeOf(os.Getenv("OTEL_SEMCONV_STABILITY_OPT_IN"))
}

// semconvModeOf parses a value of OTEL_SEMCONV_STABILITY_OPT_IN.
func semconvModeOf(optIn string) semconvMode {
	for p := range strings.SplitSeq(optIn, ",") {
		switch strings.TrimSpace(p) {
		case "rpc/dup":
			return semconvDup
		case "rpc/old":
			return semconvOld
		}
	}
	return semconvNew
}

// methodAttrs returns the rpc.* attributes of a full method name
// ("/pkg.Service/Method").
func methodAttrs(mode semconvMode, fullMethod string) []attribute.KeyValue {
	name, ok := strings.CutPrefix(fullMethod, "/")
	if !ok {
		return nil // not a gRPC full method name: nothing to say
	}
	var attrs []attribute.KeyValue
	if mode != semconvNew {
		attrs = append(attrs, oldsemconv.RPCSystemGRPC)
		if service, method, ok := strings.Cut(name, "/"); ok {
			attrs = append(attrs, oldsemconv.RPCService(service))
			if mode == semconvOld {
				attrs = append(attrs, oldsemconv.RPCMethod(method))
			}
		}
	}
	if mode != semconvOld {
		attrs = append(attrs, semconv.RPCSystemNameGRPC, semconv.RPCMethod(name))
	}
	return attrs
}
