package main

import (
	"errors"
	"os"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// loadDescriptorSet reads a FileDescriptorSet (buf build -o file.binpb,
// whose images are one; protoc --descriptor_set_out) into a registry. An
// import the set does not hold is found among the files linked into the
// command (the well-known types, google.rpc), so that a set built without
// its imports still loads when those are all it lacks.
func loadDescriptorSet(path string) (*protoregistry.Files, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, failure("--descriptor-set: %v", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, failure("--descriptor-set %s: not a FileDescriptorSet: %v", path, err)
	}
	l := loader{
		files:  new(protoregistry.Files),
		protos: make(map[string]*descriptorpb.FileDescriptorProto, len(set.GetFile())),
		seen:   make(map[string]bool),
	}
	for _, fd := range set.GetFile() {
		l.protos[fd.GetName()] = fd
	}
	for _, fd := range set.GetFile() {
		if err := l.add(fd.GetName()); err != nil {
			return nil, failure("--descriptor-set %s: %v (build it with its imports: buf build -o, or protoc --include_imports)", path, err)
		}
	}
	return l.files, nil
}

// loader registers the files of a set, each after its imports.
type loader struct {
	files  *protoregistry.Files
	protos map[string]*descriptorpb.FileDescriptorProto
	seen   map[string]bool
}

func (l *loader) add(name string) error {
	fdp, ok := l.protos[name]
	if !ok || l.seen[name] {
		return nil // found among the linked files, or registered already
	}
	l.seen[name] = true
	for _, dep := range fdp.GetDependency() {
		if err := l.add(dep); err != nil {
			return err
		}
	}
	fd, err := protodesc.NewFile(fdp, l)
	if err != nil {
		return err
	}
	return l.files.RegisterFile(fd)
}

// FindFileByPath finds an import in the set, then among the linked files.
func (l *loader) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if fd, err := l.files.FindFileByPath(path); err == nil {
		return fd, nil
	}
	if _, inSet := l.protos[path]; inSet {
		return nil, errors.New("import cycle through " + path)
	}
	return protoregistry.GlobalFiles.FindFileByPath(path)
}

// FindDescriptorByName finds a name in the set, then among the linked
// files.
func (l *loader) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := l.files.FindDescriptorByName(name); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(name)
}
