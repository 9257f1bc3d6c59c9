package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/internal/groupcommit"
	"github.com/runseal/runseal/store"
)

// BenchOptions configures Bench. The zero value measures 1, 8 and 64
// concurrent writers for 3 seconds each with 256-byte payloads.
type BenchOptions struct {
	Concurrency []int         // writer counts to measure
	Duration    time.Duration // per append and insert measurement
	Payload     int           // bytes of payload per record
	Schema      string        // schema for the journal and the ceiling table; "runseal_bench" when empty
}

// BenchResult is one concurrency level: the store's throughput beside the
// same server's ceiling for plain single-row inserts of rows the size of a
// record row, measured in the same run.
type BenchResult struct {
	Concurrency   int     `json:"concurrency"`
	InsertsPerSec float64 `json:"plain_inserts_per_sec"` // the ceiling: one autocommit INSERT per op
	// BatchedInsertsPerSec is the batched ceiling: one committer writes
	// every writer's pending row with one COPY in one transaction, the
	// best any group commit of plain rows gets from this server.
	BatchedInsertsPerSec float64 `json:"batched_inserts_per_sec"`
	AppendsPerSec        float64 `json:"appends_per_sec"`          // one leased one-record Append per op
	SealsPerSec          float64 `json:"seals_per_sec"`            // one Seal of a concluded run per op, one tenant
	AppendRatio          float64 `json:"append_vs_insert"`         // AppendsPerSec / InsertsPerSec
	AppendBatchedRatio   float64 `json:"append_vs_batched_insert"` // AppendsPerSec / BatchedInsertsPerSec: the target is >= 0.5 at 64
	RecordBytes          int     `json:"record_bytes"`             // size of one record's canonical body
}

// Bench measures append and seal throughput against the plain-insert
// ceiling of the server behind dsn. It writes to fresh tenants of
// opts.Schema and to a table <schema>.bench_plain, which it empties first.
// Every write is durable (the server's own settings apply; nothing is
// relaxed for the benchmark).
func Bench(ctx context.Context, dsn string, opts BenchOptions) ([]BenchResult, error) {
	if len(opts.Concurrency) == 0 {
		opts.Concurrency = []int{1, 8, 64}
	}
	if opts.Duration <= 0 {
		opts.Duration = 3 * time.Second
	}
	if opts.Payload <= 0 {
		opts.Payload = 256
	}
	if opts.Schema == "" {
		opts.Schema = "runseal_bench"
	}
	maxConc := 0
	for _, c := range opts.Concurrency {
		if c < 1 || c > 1024 {
			return nil, &store.InvalidArgumentError{Field: "concurrency", Detail: "must be from 1 to 1024"}
		}
		maxConc = max(maxConc, c)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &store.InvalidArgumentError{Field: "dsn", Detail: err.Error()}
	}
	cfg.MaxConns = int32(maxConc + 4)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	// Opening a store migrates the schema the ceiling table goes in.
	meta, err := New(ctx, pool, Options{Schema: opts.Schema})
	if err != nil {
		return nil, err
	}
	meta.Close()
	qs := pgx.Identifier{opts.Schema}.Sanitize()
	// The ceiling table has the columns of a record row and its primary key,
	// and none of the journal's other indexes, locks or derived rows.
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+qs+`.bench_plain(
		tenant text COLLATE "C" NOT NULL, run text COLLATE "C" NOT NULL, seq bigint NOT NULL,
		kind text NOT NULL, prev_hash bytea NOT NULL, hash bytea NOT NULL, raw bytea NOT NULL,
		PRIMARY KEY (tenant, run, seq))`); err != nil {
		return nil, fmt.Errorf("bench: create ceiling table: %w", err)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE `+qs+`.bench_plain`); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	insert := `INSERT INTO ` + qs + `.bench_plain(tenant, run, seq, kind, prev_hash, hash, raw) VALUES($1, $2, $3, $4, $5, $6, $7)`
	payload := fmt.Sprintf(`{"data":%q}`, strings.Repeat("x", opts.Payload))
	var out []BenchResult
	for _, conc := range opts.Concurrency {
		r := BenchResult{Concurrency: conc}
		// Appends: each writer holds a lease on its own run.
		s, err := New(ctx, pool, Options{Schema: opts.Schema, Tenant: benchTenant("a")})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		runs := make([]store.RunID, conc)
		epochs := make([]store.Epoch, conc)
		for i := range runs {
			runs[i] = store.NewRunID()
			l, err := s.Acquire(ctx, runs[i], fmt.Sprintf("bench-%d", i), time.Hour)
			if err != nil {
				return nil, err
			}
			epochs[i] = l.Epoch
		}
		var sample []byte
		var sampleOnce sync.Once
		appendOp := func(ctx context.Context, w, i int) error {
			recs, err := s.Append(ctx, epochs[w], []store.Append{{Run: runs[w], Kind: "Bench", Fields: []byte(payload)}})
			if err == nil {
				sampleOnce.Do(func() { sample = recs[0].Raw })
			}
			return err
		}
		// Warm up: open the pool's connections and prepare the statements,
		// so neither measurement pays for them; the append warm-up also
		// yields the record bytes the ceiling's rows copy.
		if _, _, err := measure(ctx, conc, warmup, 0, appendOp); err != nil {
			return nil, fmt.Errorf("bench: append warm-up at %d: %w", conc, err)
		}
		r.RecordBytes = len(sample)
		// The ceiling, in the same run on the same server, rows of the
		// same size as the records.
		prev, hash := make([]byte, 32), make([]byte, 32)
		tenant := benchTenant("p")
		seqs := make([]int64, conc)
		insertOp := func(ctx context.Context, w, i int) error {
			seqs[w]++
			_, err := pool.Exec(ctx, insert, tenant, runs[w].String(), seqs[w], "Bench", prev, hash, sample)
			return err
		}
		if _, _, err := measure(ctx, conc, warmup, 0, insertOp); err != nil {
			return nil, fmt.Errorf("bench: plain insert warm-up at %d: %w", conc, err)
		}
		batched := newBatchedCeiling(pool, opts.Schema, tenant, sample)
		defer batched.Close()
		batchedOp := func(ctx context.Context, w, i int) error {
			seqs[w]++
			return batched.Submit(ctx, plainRow{run: runs[w].String(), seq: seqs[w]})
		}
		if _, _, err := measure(ctx, conc, warmup, 0, batchedOp); err != nil {
			return nil, fmt.Errorf("bench: batched insert warm-up at %d: %w", conc, err)
		}
		// Alternate short slices of each, so that load from elsewhere on
		// the machine falls on both figures alike.
		var appends, inserts, binserts int
		var appendTime, insertTime, binsertTime time.Duration
		for k := 0; k < benchSlices; k++ {
			n, el, err := measure(ctx, conc, opts.Duration/benchSlices, 0, appendOp)
			if err != nil {
				return nil, fmt.Errorf("bench: append at %d: %w", conc, err)
			}
			appends, appendTime = appends+n, appendTime+el
			n, el, err = measure(ctx, conc, opts.Duration/benchSlices, 0, insertOp)
			if err != nil {
				return nil, fmt.Errorf("bench: plain insert at %d: %w", conc, err)
			}
			inserts, insertTime = inserts+n, insertTime+el
			n, el, err = measure(ctx, conc, opts.Duration/benchSlices, 0, batchedOp)
			if err != nil {
				return nil, fmt.Errorf("bench: batched insert at %d: %w", conc, err)
			}
			binserts, binsertTime = binserts+n, binsertTime+el
		}
		r.AppendsPerSec = float64(appends) / appendTime.Seconds()
		r.InsertsPerSec = float64(inserts) / insertTime.Seconds()
		r.BatchedInsertsPerSec = float64(binserts) / binsertTime.Seconds()
		r.AppendRatio = r.AppendsPerSec / r.InsertsPerSec
		r.AppendBatchedRatio = r.AppendsPerSec / r.BatchedInsertsPerSec
		// Seals: concluded runs prepared first, then sealed by conc writers
		// into one tenant's log.
		ss, err := New(ctx, pool, Options{Schema: opts.Schema, Tenant: benchTenant("s")})
		if err != nil {
			return nil, err
		}
		defer ss.Close()
		total := max(200, 20*conc)
		sealRuns := make([]store.RunID, total)
		var next atomic.Int64
		if _, _, err := measure(ctx, min(conc, 16), 0, total, func(ctx context.Context, w, i int) error {
			k := next.Add(1) - 1
			sealRuns[k] = store.NewRunID()
			_, err := ss.Append(ctx, 1, []store.Append{{Run: sealRuns[k], Kind: "Bench", Fields: []byte(payload)},
				{Run: sealRuns[k], Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}})
			return err
		}); err != nil {
			return nil, fmt.Errorf("bench: prepare seals: %w", err)
		}
		next.Store(0)
		n, el, err := measure(ctx, conc, 0, total, func(ctx context.Context, w, i int) error {
			_, err := ss.Seal(ctx, sealRuns[next.Add(1)-1], 1, "succeeded")
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("bench: seal at %d: %w", conc, err)
		}
		r.SealsPerSec = float64(n) / el.Seconds()
		out = append(out, r)
	}
	return out, nil
}

// plainRow is one row of the batched ceiling.
type plainRow struct {
	run string
	seq int64
}

// newBatchedCeiling starts the batched ceiling: one committer that writes
// all pending rows of bench_plain with one COPY in one transaction.
func newBatchedCeiling(pool *pgxpool.Pool, schema, tenant string, raw []byte) *groupcommit.Queue[plainRow] {
	prev, hash := make([]byte, 32), make([]byte, 32)
	return groupcommit.New(groupcommit.Config[plainRow]{
		MaxGroup: 1024,
		Attempt: func(ms []*groupcommit.Member[plainRow]) ([]*groupcommit.Member[plainRow], error) {
			ctx := context.Background()
			rows := make([][]any, len(ms))
			for i, m := range ms {
				rows[i] = []any{tenant, m.Req.run, m.Req.seq, "Bench", prev, hash, raw}
			}
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := tx.CopyFrom(ctx, pgx.Identifier{schema, "bench_plain"},
					[]string{"tenant", "run", "seq", "kind", "prev_hash", "hash", "raw"}, pgx.CopyFromRows(rows))
				return err
			})
			for _, m := range ms {
				m.Answer(err)
			}
			return nil, err
		},
	})
}

// warmup is run, unmeasured, before each measurement.
const warmup = 500 * time.Millisecond

// benchSlices is how many alternating slices the append and insert
// measurements are cut into.
const benchSlices = 6

func benchTenant(kind string) string {
	return "bench-" + kind + "-" + strings.ToLower(store.NewRunID().String())
}

// measure runs op from conc goroutines until d has passed (d > 0) or ops
// operations have run in all (ops > 0), and returns how many completed and
// how long it took. The first error stops every goroutine.
func measure(ctx context.Context, conc int, d time.Duration, ops int, op func(ctx context.Context, worker, i int) error) (int, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done, issued atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				if d > 0 && time.Now().After(deadline) {
					return
				}
				if ops > 0 && issued.Add(1) > int64(ops) {
					return
				}
				if err := op(ctx, w, i); err != nil {
					if !errors.Is(err, context.Canceled) {
						once.Do(func() { firstErr = err; cancel() })
					}
					return
				}
				done.Add(1)
			}
		}(w)
	}
	wg.Wait()
	return int(done.Load()), time.Since(start), firstErr
}
