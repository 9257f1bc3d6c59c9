package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"

	msqlite "modernc.org/sqlite"
)

// openReadPool opens the read-only pool whose statements hand out rows of
// durable commits only: before the first row of each statement, a
// connection waits for wait (walSync.awaitDurable), which returns once
// every writer transaction begun by then is flushed. The statement's
// snapshot was taken when it first stepped, before the wait began, so
// every commit it can see is among those. With wait nil it is a plain pool.
func openReadPool(dsn string, wait func(context.Context) error) *sql.DB {
	return sql.OpenDB(&readConnector{dsn: dsn, wait: wait})
}

type readConnector struct {
	dsn  string
	wait func(context.Context) error
}

func (c *readConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := (&msqlite.Driver{}).Open(c.dsn)
	if err != nil || c.wait == nil {
		return conn, err
	}
	return &readConn{Conn: conn, wait: c.wait}, nil
}

func (c *readConnector) Driver() driver.Driver { return &msqlite.Driver{} }

// readConn passes everything to the SQLite connection and wraps the rows
// its queries return.
type readConn struct {
	driver.Conn
	wait func(context.Context) error
}

// The interfaces of the SQLite connection that database/sql uses.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.QueryerContext
	driver.ExecerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

var _ sqliteConn = (*readConn)(nil)

func (c *readConn) inner() sqliteConn { return c.Conn.(sqliteConn) }

func (c *readConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.inner().BeginTx(ctx, opts)
}

func (c *readConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := c.inner().PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &readStmt{Stmt: st, wait: c.wait}, nil
}

func (c *readConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *readConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.inner().QueryContext(ctx, q, args)
	if err != nil {
		return nil, err
	}
	return &readRows{Rows: rows, ctx: ctx, wait: c.wait}, nil
}

func (c *readConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.inner().ExecContext(ctx, q, args)
}

func (c *readConn) Ping(ctx context.Context) error { return c.inner().Ping(ctx) }

func (c *readConn) ResetSession(ctx context.Context) error { return c.inner().ResetSession(ctx) }

func (c *readConn) IsValid() bool { return c.inner().IsValid() }

type sqliteStmt interface {
	driver.Stmt
	driver.StmtQueryContext
	driver.StmtExecContext
}

type readStmt struct {
	driver.Stmt
	wait func(context.Context) error
}

func (s *readStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := s.Stmt.(sqliteStmt).QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	return &readRows{Rows: rows, ctx: ctx, wait: s.wait}, nil
}

func (s *readStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.Stmt.(sqliteStmt).ExecContext(ctx, args)
}

// readRows waits for durability before its first row.
type readRows struct {
	driver.Rows
	ctx    context.Context
	wait   func(context.Context) error
	waited bool
}

func (r *readRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if r.waited || (err != nil && err != io.EOF) {
		return err
	}
	r.waited = true
	// Even an empty result waits: that a row is absent is as much a
	// reading of the snapshot as a row.
	if werr := r.wait(r.ctx); werr != nil {
		return werr
	}
	return err
}
