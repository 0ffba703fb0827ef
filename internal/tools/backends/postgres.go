package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"
)

// probePostgres connects to the PostgreSQL that rawURL names and returns
// where it is when the server accepts the URL's user for its database. It
// speaks just enough of the protocol (a version 3 startup message, without
// TLS) to read the server's first answer, so that the check needs no
// driver: AuthenticationOk (trust, as the tests expect) or a request for a
// password are accepted; an error (an unknown role or database) is not.
func probePostgres(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%s is not a URL: %v", postgresURLEnv, err)
	}
	host := u.Hostname()
	if host == "" {
		host = "127.0.0.1"
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	addr := net.JoinHostPort(host, port)
	user := u.User.Username()
	if user == "" {
		user = "postgres"
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = user
	}
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", fmt.Errorf("not reachable at %s (%v)", addr, errors.Unwrap(err))
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write(startupMessage(user, db)); err != nil {
		return "", fmt.Errorf("no PostgreSQL at %s (%v)", addr, err)
	}
	answer, err := readStartupAnswer(bufio.NewReader(conn))
	var refused refusal
	switch {
	case errors.As(err, &refused):
		return "", fmt.Errorf("PostgreSQL at %s refused user %s, database %s (%s)", addr, user, db, string(refused))
	case err != nil:
		return "", fmt.Errorf("no PostgreSQL at %s (%v)", addr, err)
	}
	_, _ = conn.Write([]byte{'X', 0, 0, 0, 4}) // Terminate
	return fmt.Sprintf("PostgreSQL at %s, user %s, database %s (%s)", addr, user, db, answer), nil
}

// startupMessage is a protocol 3.0 StartupMessage.
func startupMessage(user, db string) []byte {
	var body []byte
	body = binary.BigEndian.AppendUint32(body, 3<<16)
	for _, s := range []string{"user", user, "database", db} {
		body = append(append(body, s...), 0)
	}
	body = append(body, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}

// readStartupAnswer reads the server's answers to a startup message until
// it is ready for queries, asks for a password, or refuses, and says which.
func readStartupAnswer(r *bufio.Reader) (string, error) {
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return "", err
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 || n > 1<<16 {
			return "", fmt.Errorf("not the PostgreSQL protocol")
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return "", err
		}
		switch head[0] {
		case 'R': // Authentication*: 0 is AuthenticationOk
			if n < 4 {
				return "", fmt.Errorf("not the PostgreSQL protocol")
			}
			if binary.BigEndian.Uint32(body) != 0 {
				return "asks for a password, taken from the URL", nil
			}
		case 'S', 'K', 'N': // ParameterStatus, BackendKeyData, NoticeResponse
		case 'Z': // ReadyForQuery
			return "trust", nil
		case 'E':
			return "", refusal(errorMessage(body))
		default:
			return "", fmt.Errorf("not the PostgreSQL protocol")
		}
	}
}

// refusal is the message of the server's ErrorResponse.
type refusal string

func (r refusal) Error() string { return string(r) }

// errorMessage returns the M field of an ErrorResponse body.
func errorMessage(body []byte) string {
	for _, f := range strings.Split(string(body), "\x00") {
		if strings.HasPrefix(f, "M") {
			return f[1:]
		}
	}
	return "unknown error"
}
