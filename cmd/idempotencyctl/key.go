package main

import (
	"strings"

	"github.com/spf13/pflag"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

// keyFlags name one key: its store key as the argument (with the scope
// its calls had, to open a sealed record), or the client's key with the
// method or operation it was sent to and its scope.
type keyFlags struct {
	method    string
	operation string
	namespace string
	scope     string
	key       string
}

func (k *keyFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&k.method, "method", "", "the full method the client called, /package.Service/Method")
	fs.StringVar(&k.operation, "operation", "", "the operation of Do or Once the key was run under (never starts with /)")
	fs.StringVar(&k.namespace, "namespace", "", "the namespace of the method's policy (MethodPolicy.Namespace or the proto option's), instead of --method")
	fs.StringVar(&k.scope, "scope", "", "the scope the server's WithScope function gives the client (a tenant); empty without one. With a STORE_KEY, used only to open a sealed record")
	fs.StringVar(&k.key, "key", "", "the client's idempotency key, with --method, --operation or --namespace")
}

// keyRef is the key a command line names: a store key with the scope its
// sealed record is opened for, or a client's key.
type keyRef struct {
	storeKey string
	scope    string // with storeKey
	// name, with storeKey, is the method or operation whose key it is,
	// when the command line names it (resolve --method).
	name   string
	client *adminv1.ClientKey
}

// ref returns the key that args (a store key, or none) and the flags name.
func (k *keyFlags) ref(args []string) (keyRef, error) {
	var names []string
	for _, n := range []struct{ flag, value string }{{"--method", k.method}, {"--operation", k.operation}, {"--namespace", k.namespace}} {
		if n.value != "" {
			names = append(names, n.flag)
		}
	}
	switch {
	case len(args) == 1 && (len(names) > 0 || k.key != ""):
		return keyRef{}, usageError("name the key by its store key or by %s and --key, not both", orList(names))
	case len(args) == 1:
		if !isStoreKey(args[0]) {
			return keyRef{}, usageError("%q is not a store key (43 characters of base64url, as list prints them): name a client's key with --method, --operation or --namespace, and --key", args[0])
		}
		return keyRef{storeKey: args[0], scope: k.scope}, nil
	case len(names) > 1:
		return keyRef{}, usageError("%s: name one of them", strings.Join(names, " and "))
	case len(names) == 0:
		return keyRef{}, usageError("name a key: its STORE_KEY, or --method, --operation or --namespace with --key (and --scope)")
	case k.key == "":
		return keyRef{}, usageError("%s needs --key, the client's idempotency key", names[0])
	}
	name := k.operation + k.namespace
	if strings.HasPrefix(name, "/") {
		// An operation or a namespace never starts with "/"
		// (idempotency.ValidateOperation): the server reads such a name as
		// a method's.
		return keyRef{}, usageError("%s %q starts with \"/\", as only a gRPC method's name does, and an operation or a namespace never does: name a method with --method", names[0], name)
	}
	if k.method != "" {
		m, err := fullMethod(k.method)
		if err != nil {
			return keyRef{}, err
		}
		name = m
	}
	return keyRef{client: &adminv1.ClientKey{Name: name, Scope: k.scope, Key: k.key}}, nil
}

// fullMethod returns m as a full method name, "/package.Service/Method",
// adding the leading slash grpcurl's form leaves out.
func fullMethod(m string) (string, error) {
	m = "/" + strings.TrimPrefix(m, "/")
	if i := strings.LastIndexByte(m, '/'); i <= 1 || i == len(m)-1 || !strings.Contains(m[1:i], ".") {
		return "", usageError("--method %q: want a full method name, /package.Service/Method", strings.TrimPrefix(m, "/"))
	}
	return m, nil
}

func orList(names []string) string {
	if len(names) == 0 {
		return "--method"
	}
	return strings.Join(names, ", ")
}

// storeKeyLen is the length of every store key the server derives: the
// unpadded base64url of a SHA-256 (docs/operations.md, The store key).
const storeKeyLen = 43

// isStoreKey reports whether k has the shape of a store key.
func isStoreKey(k string) bool {
	if len(k) != storeKeyLen {
		return false
	}
	for _, c := range []byte(k) {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

func (r keyRef) getRequest() *adminv1.GetKeyRequest {
	if r.client != nil {
		return &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_ClientKey{ClientKey: r.client}}
	}
	return &adminv1.GetKeyRequest{Key: &adminv1.GetKeyRequest_StoreKey{StoreKey: r.storeKey}, Scope: r.scope}
}

func (r keyRef) purgeRequest(etag string, force bool) *adminv1.PurgeKeyRequest {
	req := &adminv1.PurgeKeyRequest{Etag: etag, Force: force}
	if r.client != nil {
		req.Key = &adminv1.PurgeKeyRequest_ClientKey{ClientKey: r.client}
	} else {
		req.Key = &adminv1.PurgeKeyRequest_StoreKey{StoreKey: r.storeKey}
		req.Scope = r.scope
	}
	return req
}

// scopeArg is the --scope argument that names r's scope beside its store
// key in a command printed to run, "" when the scope is empty.
func (r keyRef) scopeArg() string {
	scope := r.scope
	if r.client != nil {
		scope = r.client.GetScope()
	}
	if scope == "" {
		return ""
	}
	return " --scope " + shellQuote(scope)
}

// shellQuote returns s as one word of a POSIX shell: as is when it holds
// only characters no shell reads, and otherwise single-quoted.
func shellQuote(s string) string {
	for _, c := range []byte(s) {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', strings.IndexByte("-_.,:/@+=%", c) >= 0:
		default:
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
