// Package natstest starts a NATS server with JetStream inside the process,
// for the tests of jetstreamidempotency and the examples/jetstream demo: a
// real broker on a free loopback port, never a NATS server the machine may
// run on 4222. It is published with jetstreamidempotency, for its tests,
// the examples' and those of services that test against a real broker;
// only a build that imports it compiles nats-server.
package natstest

import (
	"errors"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds the wait for the server to accept connections.
const readyTimeout = 10 * time.Second

// Start starts a NATS server with JetStream on a free loopback port,
// keeping its streams in dir, and returns once it accepts connections.
// Connect to its ClientURL; Shutdown stops it.
func Start(dir string) (*server.Server, error) {
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		return nil, errors.New("natstest: the NATS server was not ready in time")
	}
	return s, nil
}
