package idempotency_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// The store key of a client's key, from the server and by hand: each of
// the method, the scope and the key preceded by its length (a uvarint,
// one byte below 128), hashed with SHA-256, in unpadded base64url. An
// operation or a namespace adds a zero byte in front.
func ExampleServer_StoreKey() {
	mem := memorystore.New()
	defer mem.Close()
	srv := idempotency.NewServer(mem)

	method, _ := srv.StoreKey("/shop.v1.Orders/Create", "acme", "order-7")
	operation, _ := srv.StoreKey("orders.create", "acme", "order-7")
	fmt.Println(method)
	fmt.Println(operation)

	byHand := func(prefix []byte, name, scope, key string) string {
		b := prefix
		for _, s := range []string{name, scope, key} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
		sum := sha256.Sum256(b)
		return base64.RawURLEncoding.EncodeToString(sum[:])
	}
	fmt.Println(byHand(nil, "/shop.v1.Orders/Create", "acme", "order-7") == method)
	fmt.Println(byHand([]byte{0}, "orders.create", "acme", "order-7") == operation)
	// Output:
	// 8yqvEk4bIGFmOXkJ_9d-Le-0ESHOl43QGummi2l7sS0
	// jzaCsBC7kbaMQ-bmYNXw4XXTEB4QDj5vE4fQnihzok8
	// true
	// true
}
