package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartBouncer starts a PgBouncer in transaction pooling mode on a free
// loopback port, in front of the package's database, with at most
// poolSize server connections, and stops it when tb ends. It returns a
// connection string for clients of the bouncer. Without pgbouncer on PATH
// (apt-get install pgbouncer) it skips tb, or fails it under
// [RequireEnv]=1. PgBouncer refuses to run as root: as root, it runs as
// the user postgres.
func StartBouncer(tb testing.TB, poolSize int) string {
	tb.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		unavailable(tb, fmt.Errorf("pgbouncer is needed for this test (apt-get install pgbouncer): %w", err))
	}
	cfg, err := pgx.ParseConfig(URL(tb))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil { // writable for its log as user postgres
		tb.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	server := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	if cfg.Password != "" {
		server += " password=" + cfg.Password
	}
	ini := fmt.Sprintf(`[databases]
%s = %s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = %d
max_client_conn = 1000
logfile = %s
`, cfg.Database, server, port, poolSize, filepath.Join(dir, "pgbouncer.log"))
	conf := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(conf, []byte(ini), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, conf)
	if os.Geteuid() == 0 {
		cred, err := credentialOf("postgres")
		if err != nil {
			unavailable(tb, fmt.Errorf("pgbouncer will not run as root, and: %w", err))
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("pgtest: starting pgbouncer: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done //nolint:errcheck // Wait's error is the kill's
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitListening(addr, done); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		tb.Fatalf("pgtest: pgbouncer did not start: %v\n%s", err, log)
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, addr, cfg.Database)
}

// credentialOf returns the credential of the named user.
func credentialOf(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits up to 10s for addr to accept connections, or for the
// process to exit.
func waitListening(addr string, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case err := <-exited:
			return errors.Join(errors.New("pgbouncer exited"), err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
