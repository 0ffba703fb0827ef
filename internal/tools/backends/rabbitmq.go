package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"
)

// probeRabbitMQ connects to the RabbitMQ that rawURL (an amqp:// URL)
// names and returns which server it is and where. It speaks just enough
// of AMQP 0-9-1 to read the server's first frame, Connection.Start, whose
// properties name the product and its version, so that the check needs no
// client library; it then hangs up.
func probeRabbitMQ(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%s is not a URL: %v", rabbitURLEnv, err)
	}
	host := u.Hostname()
	if host == "" {
		host = "127.0.0.1"
	}
	port := u.Port()
	if port == "" {
		port = "5672"
	}
	addr := net.JoinHostPort(host, port)
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", fmt.Errorf("not reachable at %s (%v)", addr, errors.Unwrap(err))
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("AMQP\x00\x00\x09\x01")); err != nil {
		return "", fmt.Errorf("no AMQP server at %s (%v)", addr, err)
	}
	props, err := readConnectionStart(bufio.NewReader(conn))
	if err != nil {
		return "", fmt.Errorf("no AMQP server at %s (%v)", addr, err)
	}
	product, version := props["product"], props["version"]
	if product == "" {
		product = "an AMQP server"
	}
	if version != "" {
		version = " " + version
	}
	return fmt.Sprintf("%s%s at %s", product, version, addr), nil
}

// errNotAMQP is the error of a server that does not answer as an AMQP
// 0-9-1 server does.
var errNotAMQP = errors.New("not the AMQP 0-9-1 protocol")

// readConnectionStart reads the server's first frame, which must be a
// Connection.Start method, and returns the string entries of its server
// properties.
func readConnectionStart(r *bufio.Reader) (map[string]string, error) {
	var head [7]byte // type, channel, size
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(head[3:])
	if head[0] != 1 || size < 6 || size > 1<<16 { // a method frame
		return nil, errNotAMQP
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint16(body) != 10 || binary.BigEndian.Uint16(body[2:]) != 10 { // connection.start
		return nil, errNotAMQP
	}
	return stringEntries(body[6:]) // after the class, method and version
}

// stringEntries returns the long-string entries of an AMQP field table
// (its 4-byte size, then entries of a short-string name, a type byte and
// a value), skipping the values of other types.
func stringEntries(b []byte) (map[string]string, error) {
	if len(b) < 4 {
		return nil, errNotAMQP
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-4 {
		return nil, errNotAMQP
	}
	table, out := b[4:4+n], map[string]string{}
	fixed := map[byte]int{'t': 1, 'b': 1, 'B': 1, 's': 2, 'u': 2, 'I': 4, 'i': 4, 'f': 4, 'l': 8, 'L': 8, 'd': 8, 'T': 8, 'D': 5, 'V': 0}
	for len(table) > 0 {
		nameLen := int(table[0])
		if len(table) < 2+nameLen {
			return nil, errNotAMQP
		}
		name, typ := string(table[1:1+nameLen]), table[1+nameLen]
		table = table[2+nameLen:]
		size, ok := fixed[typ]
		if !ok { // S, F, A, x: a 4-byte size, then the value
			if len(table) < 4 {
				return nil, errNotAMQP
			}
			size = 4 + int(binary.BigEndian.Uint32(table))
		}
		if size > len(table) || size < 0 {
			return nil, errNotAMQP
		}
		if typ == 'S' {
			out[name] = string(table[4:size])
		}
		table = table[size:]
	}
	return out, nil
}
