package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/internal/benchjournal"
)

// StatementTracer is a pool tracer (pgxpool.Config.ConnConfig.Tracer, and
// the pool's acquire tracer) that accounts the time between BeginTrace and
// EndTrace spent waiting for a connection and inside statements, and
// whether a statement ran on a connection for the first time: what the
// proof benchmark needs to tell a slow proof's cause. Statements of every
// caller of the pool in that window are counted, so it is for a pool one
// caller at a time uses.
type StatementTracer struct {
	mu      sync.Mutex
	on      bool
	cur     benchjournal.Trace
	seen    map[stmtOnConn]bool
	started map[*pgx.Conn]time.Time
}

type stmtOnConn struct {
	pid uint32
	sql string
}

type acquireStart struct{}

// BeginTrace starts accounting a new window.
func (t *StatementTracer) BeginTrace() {
	t.mu.Lock()
	t.on, t.cur = true, benchjournal.Trace{}
	t.mu.Unlock()
}

// EndTrace stops accounting and returns the window's account.
func (t *StatementTracer) EndTrace() benchjournal.Trace {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on = false
	return t.cur
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *StatementTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen, t.started = map[stmtOnConn]bool{}, map[*pgx.Conn]time.Time{}
	}
	k := stmtOnConn{conn.PgConn().PID(), data.SQL}
	if !t.seen[k] {
		t.seen[k] = true
		if t.on {
			t.cur.FirstUse = true
		}
	}
	t.started[conn] = time.Now()
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer; for a query, pgx calls it
// once its rows are closed.
func (t *StatementTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t0, ok := t.started[conn]
	delete(t.started, conn)
	if ok && t.on {
		t.cur.Statements += time.Since(t0)
		t.cur.Count++
	}
}

// TraceAcquireStart implements pgxpool.AcquireTracer.
func (t *StatementTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return context.WithValue(ctx, acquireStart{}, time.Now())
}

// TraceAcquireEnd implements pgxpool.AcquireTracer.
func (t *StatementTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	t0, ok := ctx.Value(acquireStart{}).(time.Time)
	if !ok {
		return
	}
	d := time.Since(t0)
	t.mu.Lock()
	if t.on {
		t.cur.Acquire += d
	}
	t.mu.Unlock()
}
