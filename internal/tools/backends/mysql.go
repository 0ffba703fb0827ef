package main

import (
	"bufio"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"time"
)

// mysqlDSN is the part of a go-sql-driver/mysql DSN the probe reads:
// [user[:password]@][tcp(address)]/[dbname][?params].
var mysqlDSN = regexp.MustCompile(`^(?:([^:@/]*)(?::([^@]*))?@)?(?:tcp\(([^)]*)\))?/([^?/]*)(?:\?.*)?$`)

// Client capability flags of the handshake response.
const (
	clientLongPassword   = 0x00000001
	clientConnectWithDB  = 0x00000008
	clientProtocol41     = 0x00000200
	clientSecureConn     = 0x00008000
	clientPluginAuth     = 0x00080000
	nativePasswordPlugin = "mysql_native_password"
)

// probeMySQL connects to the MySQL or MariaDB server that dsn names and
// returns what it is when the server accepts the DSN's user. It speaks
// just enough of the protocol, without TLS and with mysql_native_password,
// to read the server's greeting and its answer to the login, so that the
// check needs no driver: an OK is accepted, and so is a request to switch
// to an authentication method other than mysql_native_password (MySQL 8's
// caching_sha2_password, which the tests' driver speaks); an error (an
// unknown user, a wrong password, a missing database) is not.
func probeMySQL(dsn string) (string, error) {
	m := mysqlDSN.FindStringSubmatch(dsn)
	if m == nil {
		return "", fmt.Errorf("%s is not a DSN of the form user:password@tcp(host:port)/", mysqlURLEnv)
	}
	user, password, addr, db := m[1], m[2], m[3], m[4]
	if addr == "" {
		addr = "127.0.0.1:3306"
	}
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", fmt.Errorf("not reachable at %s (%v)", addr, errors.Unwrap(err))
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	r := bufio.NewReader(conn)
	greeting, _, err := readMySQLPacket(r)
	if err != nil {
		return "", fmt.Errorf("no MySQL at %s (%v)", addr, err)
	}
	version, scramble, err := parseGreeting(greeting)
	if err != nil {
		return "", fmt.Errorf("no MySQL at %s (%v)", addr, err)
	}
	if _, err := conn.Write(handshakeResponse(user, password, db, scramble)); err != nil {
		return "", fmt.Errorf("no MySQL at %s (%v)", addr, err)
	}
	answer, seq, err := readMySQLPacket(r)
	if err != nil {
		return "", fmt.Errorf("no MySQL at %s (%v)", addr, err)
	}
	who := "user " + user
	if password == "" {
		who += " without a password"
	}
	if len(answer) > 0 && answer[0] == 0xfe { // switch to another authentication method
		plugin, data, _ := strings.Cut(string(answer[1:]), "\x00")
		if plugin != nativePasswordPlugin {
			return fmt.Sprintf("%s at %s, %s (%s, taken from the DSN)", version, addr, who, plugin), nil
		}
		auth := nativePassword(password, []byte(strings.TrimSuffix(data, "\x00")))
		head := []byte{byte(len(auth)), byte(len(auth) >> 8), byte(len(auth) >> 16), seq + 1}
		if _, err := conn.Write(append(head, auth...)); err != nil {
			return "", fmt.Errorf("no MySQL at %s (%v)", addr, err)
		}
		if answer, _, err = readMySQLPacket(r); err != nil {
			return "", fmt.Errorf("no MySQL at %s (%v)", addr, err)
		}
	}
	switch {
	case len(answer) > 0 && answer[0] == 0x00:
	case len(answer) > 3 && answer[0] == 0xff:
		msg := string(answer[3:])
		if strings.HasPrefix(msg, "#") && len(msg) > 6 {
			msg = msg[6:] // the SQL state
		}
		return "", fmt.Errorf("%s at %s refused user %s (%s)", version, addr, user, msg)
	default:
		return "", fmt.Errorf("no MySQL at %s (an answer of an unknown kind to the login)", addr)
	}
	return fmt.Sprintf("%s at %s, %s", version, addr, who), nil
}

// readMySQLPacket reads one packet: its payload and sequence number.
func readMySQLPacket(r *bufio.Reader) ([]byte, byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, 0, err
	}
	n := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
	if n == 0 || n > 1<<16 {
		return nil, 0, fmt.Errorf("not the MySQL protocol")
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, 0, err
	}
	return payload, head[3], nil
}

// parseGreeting reads a protocol 10 greeting: the server's name and
// version, and the 20 bytes of its scramble.
func parseGreeting(p []byte) (version string, scramble []byte, err error) {
	if p[0] == 0xff && len(p) > 3 {
		return "", nil, fmt.Errorf("the server refused the connection: %s", p[3:])
	}
	if p[0] != 10 {
		return "", nil, fmt.Errorf("not the MySQL protocol")
	}
	v, rest, ok := strings.Cut(string(p[1:]), "\x00")
	// connection id (4), scramble part 1 (8), filler (1), capabilities
	// (2), charset (1), status (2), capabilities (2), scramble length
	// (1), reserved (10), scramble part 2 (12 and a NUL).
	if !ok || len(rest) < 4+8+1+2+1+2+2+1+10+12 {
		return "", nil, fmt.Errorf("not the MySQL protocol")
	}
	b := []byte(rest)
	scramble = append(append(scramble, b[4:12]...), b[31:43]...)
	name := "MySQL " + v
	if i := strings.Index(v, "MariaDB"); i >= 0 {
		name = "MariaDB " + strings.TrimPrefix(v, "5.5.5-")
	}
	return name, scramble, nil
}

// handshakeResponse is a HandshakeResponse41 that logs user in with
// mysql_native_password.
func handshakeResponse(user, password, db string, scramble []byte) []byte {
	flags := uint32(clientLongPassword | clientProtocol41 | clientSecureConn | clientPluginAuth)
	if db != "" {
		flags |= clientConnectWithDB
	}
	var p []byte
	p = binary.LittleEndian.AppendUint32(p, flags)
	p = binary.LittleEndian.AppendUint32(p, 1<<24) // max packet
	p = append(p, 45)                              // utf8mb4_general_ci
	p = append(p, make([]byte, 23)...)
	p = append(append(p, user...), 0)
	auth := nativePassword(password, scramble)
	p = append(append(p, byte(len(auth))), auth...)
	if db != "" {
		p = append(append(p, db...), 0)
	}
	p = append(append(p, nativePasswordPlugin...), 0)
	head := []byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), 1}
	return append(head, p...)
}

// nativePassword is mysql_native_password's answer to scramble:
// SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password))), empty for an
// empty password.
func nativePassword(password string, scramble []byte) []byte {
	if password == "" {
		return nil
	}
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	h3 := sha1.Sum(append(append([]byte(nil), scramble...), h2[:]...))
	for i := range h1 {
		h1[i] ^= h3[i]
	}
	return h1[:]
}
