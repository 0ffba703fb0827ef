package main

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

// connectionStart returns the frame an AMQP 0-9-1 server sends first,
// Connection.Start, with server properties of a nested table, a boolean
// and the product and version strings.
func connectionStart(product, version string) string {
	entry := func(name string, typ byte, value []byte) []byte {
		return append(append([]byte{byte(len(name))}, name...), append([]byte{typ}, value...)...)
	}
	long := func(s string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...) }
	var table []byte
	nested := entry("publisher_confirms", 't', []byte{1})
	table = append(table, entry("capabilities", 'F', append(binary.BigEndian.AppendUint32(nil, uint32(len(nested))), nested...))...)
	table = append(table, entry("product", 'S', long(product))...)
	table = append(table, entry("version", 'S', long(version))...)
	body := []byte{0, 10, 0, 10, 0, 9} // connection.start, version 0-9
	body = append(body, binary.BigEndian.AppendUint32(nil, uint32(len(table)))...)
	body = append(body, table...)
	body = append(body, long("PLAIN")...)
	body = append(body, long("en_US")...)
	frame := append([]byte{1, 0, 0}, binary.BigEndian.AppendUint32(nil, uint32(len(body)))...)
	return string(append(append(frame, body...), 0xce))
}

func TestProbeRabbitMQ(t *testing.T) {
	t.Parallel()
	closed := closedPort(t)
	notAMQP := serveOnce(t, "HTTP/1.1 400 Bad Request\r\n\r\n")
	rabbit := serveOnce(t, connectionStart("RabbitMQ", "3.12.1"))
	cases := map[string]struct {
		url, want string
		ok        bool
	}{
		"nothing listens": {"amqp://guest:guest@" + closed + "/", "not reachable at " + closed, false},
		"not AMQP":        {"amqp://guest:guest@" + notAMQP + "/", "no AMQP server at " + notAMQP, false},
		"not a URL":       {"amqp://%zz", "is not a URL", false},
		"RabbitMQ":        {"amqp://guest:guest@" + rabbit + "/", "RabbitMQ 3.12.1 at " + rabbit, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := probeRabbitMQ(tc.url)
			if tc.ok && (err != nil || got != tc.want) {
				t.Fatalf("probe = %q, %v; want %q", got, err, tc.want)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestProbeRabbitMQReal probes the RabbitMQ the tests use, when there is
// one.
func TestProbeRabbitMQReal(t *testing.T) {
	t.Parallel()
	url := os.Getenv(rabbitURLEnv)
	if url == "" {
		url = defaultRabbitURL
	}
	got, err := probeRabbitMQ(url)
	if err != nil {
		if os.Getenv(requireRabbitEnv) == "1" {
			t.Fatal(err)
		}
		t.Skipf("no RabbitMQ to probe (%v); set %s=1 to fail instead", err, requireRabbitEnv)
	}
	if !strings.HasPrefix(got, "RabbitMQ ") {
		t.Errorf("probe = %q", got)
	}
}

// A server's bytes never make the probe panic.
func FuzzStringEntries(f *testing.F) {
	f.Add([]byte(connectionStart("RabbitMQ", "3.12.1"))[7+6:])
	f.Add([]byte{0, 0, 0, 3, 1, 'a', 'S'})
	f.Add([]byte{0, 0, 0, 7, 1, 'a', 'S', 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = stringEntries(b)
	})
}
