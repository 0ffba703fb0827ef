package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQL error numbers the store acts on.
const (
	errDuplicateKey = 1062 // ER_DUP_ENTRY
	errNoSuchTable  = 1146 // ER_NO_SUCH_TABLE
	errDeadlock     = 1213 // ER_LOCK_DEADLOCK
)

// deadlockRetries bounds how many times a step chosen as a deadlock's
// victim runs again.
const deadlockRetries = 5

// prepared keeps one prepared statement per SQL text of the store. A
// statement is prepared on first use, and database/sql prepares it again
// on each connection the first time it runs there (one round trip more,
// once per connection); after that every step is one COM_STMT_EXECUTE,
// one round trip, whatever the DSN's interpolateParams.
type prepared struct {
	db      *sql.DB
	mu      sync.RWMutex
	m       map[string]*sql.Stmt
	pending map[string]bool // statements prepareLater is preparing
}

// stmt returns the prepared statement of q, preparing it when it is not.
// A failed preparation is not kept: the next call tries again. The lock is
// not held while preparing, which waits for a connection of the pool: a
// caller holding the pool's last connection (a handler's transaction in
// CompleteTx) must still find the statements prepared so far.
func (p *prepared) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := p.cached(q); ok {
		return st, nil
	}
	st, err := p.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.m[q]; ok { // prepared by another caller meanwhile
		_ = st.Close()
		return prev, nil
	}
	if p.m == nil {
		p.m = map[string]*sql.Stmt{}
	}
	p.m[q] = st
	return st, nil
}

// cached returns the prepared statement of q if it was prepared.
func (p *prepared) cached(q string) (*sql.Stmt, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	st, ok := p.m[q]
	return st, ok
}

// prepareLater prepares q in the background, once: for a statement that
// a caller holding a connection runs without it (CompleteTx, in the
// handler's transaction), since preparing it there would wait for another
// connection of the pool, which the handler's transaction may hold the
// last of. It ends with ctx (the store's life).
func (p *prepared) prepareLater(ctx context.Context, wg *sync.WaitGroup, q string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[q]; ok || p.pending[q] {
		return
	}
	if p.pending == nil {
		p.pending = map[string]bool{}
	}
	p.pending[q] = true
	wg.Go(func() {
		pctx, cancel := context.WithTimeout(ctx, prepareLaterTimeout)
		defer cancel()
		_, _ = p.stmt(pctx, q)
		p.mu.Lock()
		delete(p.pending, q)
		p.mu.Unlock()
	})
}

// prepareLaterTimeout bounds a preparation in the background; one that
// fails is tried again by the next caller.
const prepareLaterTimeout = 10 * time.Second

// close closes every prepared statement; later calls prepare them again.
func (p *prepared) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.m {
		_ = st.Close()
	}
	p.m = nil
}

// exec runs q, an INSERT, UPDATE or DELETE, in autocommit and returns the
// rows it affected. A statement chosen as a deadlock's victim (InnoDB rolled
// it back) runs again, up to deadlockRetries times.
func (s *Store) exec(ctx context.Context, q string, args ...any) (int64, error) {
	for attempt := 0; ; attempt++ {
		st, err := s.stmts.stmt(ctx, q)
		if err != nil {
			return 0, err
		}
		res, err := st.ExecContext(ctx, args...)
		if err == nil {
			return res.RowsAffected()
		}
		if !isDeadlock(err) || attempt == deadlockRetries {
			return 0, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return 0, err
		}
	}
}

// queryRow runs q and scans its first row into dest; found is false when
// it returned no row.
func (s *Store) queryRow(ctx context.Context, q string, args []any, dest ...any) (found bool, err error) {
	st, err := s.stmts.stmt(ctx, q)
	if err != nil {
		return false, err
	}
	err = st.QueryRowContext(ctx, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// backoff waits a few random milliseconds before a step runs again after
// a deadlock, so that the transactions that deadlocked do not meet again.
func backoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 4))))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// mysqlErr returns the server's error number of err, or 0 when err is not
// an error the server answered.
func mysqlErr(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func isDeadlock(err error) bool  { return mysqlErr(err) == errDeadlock }
func isDuplicate(err error) bool { return mysqlErr(err) == errDuplicateKey }

// mayHaveLanded reports whether a statement that failed with err may have
// committed all the same: the server did not answer with an error (which
// rolls an autocommit statement back), and the driver did not report the
// connection bad before sending it (driver.ErrBadConn, which database/sql
// retries on another connection).
func mayHaveLanded(err error) bool {
	return mysqlErr(err) == 0 && !errors.Is(err, driver.ErrBadConn)
}
