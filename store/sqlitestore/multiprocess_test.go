package sqlitestore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// The helper process: the test binary run again with helperEnv set to the
// path of the database file (see TestMain).
const (
	helperEnv  = "SQLITESTORE_TEST_CLAIMER"
	keysEnv    = "SQLITESTORE_TEST_KEYS"
	workersEnv = "SQLITESTORE_TEST_WORKERS"
)

// TestManyProcessesOneFile: four OS processes open one database file,
// each with a pool and a store of its own, and claim the same keys from
// eight goroutines each, all at once (each walks the keys from its own
// random start); a claim that wins completes its key with data naming its
// process. Beside them, as many keys are abandoned before the processes
// start (claimed with a keep, then Abandon), and every claim of those asks
// to take them over. Across the processes, every key is won exactly once
// (an abandoned one as attempt 2, with the abandoned attempt's claim time
// as Previous), and every claim that lost saw the key in flight or
// completed. Each process then
// kills itself with SIGKILL, closing nothing: a process started afterwards
// on the file finds every key completed with its winner's data, so the
// completions the store acknowledged survived the crashes.
func TestManyProcessesOneFile(t *testing.T) {
	t.Parallel()
	const (
		processes = 4
		workers   = 8
		keys      = 150
	)
	db, path := openDB(t)
	s0 := newStoreOn(t, db, sqlitestore.WithSweepInterval(0))
	for i := range keys {
		key := "a-" + strconv.Itoa(i)
		c, err := s0.Claim(t.Context(), key, []byte("fp"), time.Minute, store.ClaimOptions{Keep: time.Hour})
		if err != nil || !c.Won() {
			t.Fatalf("claim of %s: %+v, %v", key, c, err)
		}
		if err := s0.Abandon(t.Context(), key, c.Token); err != nil {
			t.Fatal(err)
		}
	}
	_ = s0.Close()
	_ = db.Close() // the file is the processes' now

	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   io.Reader
	}
	procs := make([]proc, processes)
	for i := range procs {
		cmd, stdin, out := startHelper(t, helperEnv+"="+path, keysEnv+"="+strconv.Itoa(keys), workersEnv+"="+strconv.Itoa(workers))
		procs[i] = proc{cmd, stdin, out}
	}
	// Each process says "ready" once its store is open; then all start.
	readers := make([]*bufio.Scanner, processes)
	for i, p := range procs {
		readers[i] = bufio.NewScanner(p.out)
		if !readers[i].Scan() || readers[i].Text() != "ready" {
			t.Fatalf("process %d did not get ready: %q %v", i, readers[i].Text(), readers[i].Err())
		}
	}
	for _, p := range procs {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	winners := make(map[string]string) // key -> the process that won it
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() {
			pid := strconv.Itoa(p.cmd.Process.Pid)
			done := false
			for readers[i].Scan() {
				line := readers[i].Text()
				switch {
				case line == "done":
					done = true
				case strings.HasPrefix(line, "won "):
					key := strings.TrimPrefix(line, "won ")
					mu.Lock()
					if w, ok := winners[key]; ok {
						t.Errorf("key %s won by process %s and by process %s", key, w, pid)
					}
					winners[key] = pid
					mu.Unlock()
				default:
					t.Errorf("process %s: %s", pid, line)
				}
			}
			err := p.cmd.Wait()
			var exit *exec.ExitError
			if !done || !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("process %s ended with %v (done=%v), want killed by SIGKILL after its claims", pid, err, done)
			}
		})
	}
	wg.Wait()
	if len(winners) != 2*keys {
		t.Fatalf("%d keys won, want %d", len(winners), 2*keys)
	}
	// A process started after the crashes, on the same file.
	db, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := sqlitestore.New(db, sqlitestore.WithSweepInterval(0))
	defer s.Close()
	for key, pid := range winners {
		c, err := s.Claim(t.Context(), key, []byte("fp"), time.Minute, store.ClaimOptions{})
		if err != nil || c.Won() || c.Existing.State != store.StateCompleted || string(c.Existing.Data) != pid+":"+key {
			t.Fatalf("key %s after the crashes: %+v, %v; want completed by process %s", key, c, err, pid)
		}
	}
}

// startHelper starts the test binary again as a helper process, with env
// added to its environment (which names the helper, see TestMain), and
// returns it with its standard input and output; its standard error is
// the test's.
func startHelper(t *testing.T, env ...string) (*exec.Cmd, io.WriteCloser, io.Reader) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, out
}

// claimerMain is the helper process of TestManyProcessesOneFile: it
// opens the file, says "ready", waits for "go" on its standard input,
// claims every key from each of its workers, says "won KEY" for each key
// it won and completed and "done" at the end, then kills itself. It
// returns an exit code only when it fails.
func claimerMain() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stdout, "error:", err)
		return 1
	}
	path := os.Getenv(helperEnv)
	keys, err1 := strconv.Atoi(os.Getenv(keysEnv))
	workers, err2 := strconv.Atoi(os.Getenv(workersEnv))
	if err := errors.Join(err1, err2); err != nil {
		return fail(err)
	}
	db, err := sqlitestore.Open(path)
	if err != nil {
		return fail(err)
	}
	s := sqlitestore.New(db, sqlitestore.WithSweepInterval(0))
	fmt.Fprintln(os.Stdout, "ready")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "go\n" {
		return fail(fmt.Errorf("waiting for go: %q %v", line, err))
	}
	ctx := context.Background()
	pid := strconv.Itoa(os.Getpid())
	errs := make(chan error, workers)
	var out sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			start := rand.IntN(2 * keys)
			for i := range 2 * keys {
				n := (start + i) % (2 * keys)
				key, opts := "k-"+strconv.Itoa(n), store.ClaimOptions{}
				if n >= keys {
					key, opts = "a-"+strconv.Itoa(n-keys), store.ClaimOptions{Keep: time.Hour, TakeOver: true}
				}
				c, err := s.Claim(ctx, key, []byte("fp"), time.Minute, opts)
				if err != nil {
					errs <- err
					return
				}
				if c.Won() && opts.TakeOver && (c.Attempt != 2 || c.Previous.IsZero()) {
					errs <- fmt.Errorf("take-over of %s: attempt %d, previous %v; want attempt 2 after a known claim", key, c.Attempt, c.Previous)
					return
				}
				if !c.Won() {
					if st := c.Existing.State; st != store.StateInFlight && st != store.StateCompleted {
						errs <- fmt.Errorf("claim of %s lost to an entry %v", key, st)
						return
					}
					continue
				}
				if err := s.Complete(ctx, key, c.Token, []byte(pid+":"+key), time.Hour); err != nil {
					errs <- err
					return
				}
				out.Lock()
				fmt.Fprintln(os.Stdout, "won", key)
				out.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return fail(err)
	}
	fmt.Fprintln(os.Stdout, "done")
	// A crash: no Close of the store or the pool, no checkpoint.
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
