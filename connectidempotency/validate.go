package connectidempotency

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/grpc-idempotency/idempotency"
)

// Services returns the connect-go services named (by their full names, the
// ServiceName constants of the generated connect-go code) as
// [idempotency.Server.Validate] takes the services of a server, read from
// the descriptors linked in (protoregistry.GlobalFiles), so that a
// connect-go server checks every procedure's policy at start-up as a
// grpc-go server does:
//
//	if err := srv.Validate(connectidempotency.Services(paymentsv1connect.PaymentsName)); err != nil {
//		log.Fatal(err)
//	}
//
// It panics when the descriptors have no service of one of the names.
func Services(names ...string) idempotency.ServiceInfoProvider {
	infos := make(services, len(names))
	for _, name := range names {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if err != nil || !ok {
			panic(fmt.Sprintf("connectidempotency: Services: the descriptors linked in have no service %q", name))
		}
		info := grpc.ServiceInfo{Metadata: sd.ParentFile().Path()}
		for i := range sd.Methods().Len() {
			md := sd.Methods().Get(i)
			info.Methods = append(info.Methods, grpc.MethodInfo{
				Name: string(md.Name()), IsClientStream: md.IsStreamingClient(), IsServerStream: md.IsStreamingServer(),
			})
		}
		infos[name] = info
	}
	return infos
}

// services are the services of a connect-go server as grpc-go describes
// them.
type services map[string]grpc.ServiceInfo

func (s services) GetServiceInfo() map[string]grpc.ServiceInfo { return s }
