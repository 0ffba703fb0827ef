package admin

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// resolver finds message and extension types by name in a descriptor
// registry as the server's replays do: the generated type of a name the
// registry has, when one is linked in, and otherwise a dynamic type over
// the registry's descriptor; then the generated types of names the registry
// does not have. It serves proto and protojson as the resolver of Any
// fields and extensions.
type resolver struct {
	files *protoregistry.Files
}

func newResolver(files *protoregistry.Files) resolver {
	if files == nil {
		files = protoregistry.GlobalFiles
	}
	return resolver{files: files}
}

// FindMessageByName returns the type of the message called name.
func (r resolver) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	if d, err := r.files.FindDescriptorByName(name); err == nil {
		if md, ok := d.(protoreflect.MessageDescriptor); ok {
			if mt, err := protoregistry.GlobalTypes.FindMessageByName(name); err == nil {
				return mt, nil
			}
			return dynamicpb.NewMessageType(md), nil
		}
	}
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

// FindMessageByURL returns the type of the message a google.protobuf.Any
// type URL names: the name after its last slash.
func (r resolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	return r.FindMessageByName(protoreflect.FullName(url[strings.LastIndexByte(url, '/')+1:]))
}

// FindExtensionByName returns the type of the extension called field.
func (r resolver) FindExtensionByName(field protoreflect.FullName) (protoreflect.ExtensionType, error) {
	if d, err := r.files.FindDescriptorByName(field); err == nil {
		if xd, ok := d.(protoreflect.ExtensionDescriptor); ok {
			if xt, err := protoregistry.GlobalTypes.FindExtensionByName(field); err == nil {
				return xt, nil
			}
			return dynamicpb.NewExtensionType(xd), nil
		}
	}
	return protoregistry.GlobalTypes.FindExtensionByName(field)
}

// FindExtensionByNumber returns the generated type of the extension of
// message numbered field: a registry of descriptors cannot be searched by
// number, so an extension without a generated type stays an unknown field,
// which JSON leaves out.
func (r resolver) FindExtensionByNumber(message protoreflect.FullName, field protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByNumber(message, field)
}
