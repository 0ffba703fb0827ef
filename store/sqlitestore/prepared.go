package sqlitestore

import (
	"context"
	"database/sql"
	"sync"
)

// prepared holds the store's statements, each prepared once on db:
// database/sql prepares a statement again on each connection that runs it,
// the first time, and keeps it there, so a step parses no SQL. Parsing
// the claim statement costs more than running it.
type prepared struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// stmt returns q prepared on db, preparing it the first time. A
// statement that does not prepare (its table is missing) is not kept, so
// that it is prepared again once the table is there.
func (p *prepared) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.m[q]; ok {
		return st, nil
	}
	st, err := p.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if p.m == nil {
		p.m = make(map[string]*sql.Stmt)
	}
	p.m[q] = st
	return st, nil
}

// close closes every statement prepared so far; a statement asked for
// afterwards is prepared again.
func (p *prepared) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.m {
		_ = st.Close()
	}
	p.m = nil
}

// queryRow runs the query q, prepared, and scans its one row into dest.
func (s *Store) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	st, err := s.stmts.stmt(ctx, q)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

// query runs the query q, prepared.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.stmts.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}
