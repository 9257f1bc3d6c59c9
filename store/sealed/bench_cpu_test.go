//go:build unix

package sealed_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/benchappend"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// parseOnly is a journal whose Append does the store's CPU work on a
// batch (store.BuildBatch: parse, check, encode, chain) and no I/O, so
// that a benchmark through it measures what sealing costs in CPU, callers
// and writer together, apart from the disk and the load of the machine.
type parseOnly struct {
	store.Journal // nil: only Append, Head and Tenant are called
	head          store.Head
}

func (p *parseOnly) Tenant() string { return store.DefaultTenant }

func (p *parseOnly) Head(context.Context, store.RunID) (store.Head, error) { return p.head, nil }

func (p *parseOnly) Append(_ context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	prep, err := store.BuildBatch(p.head, epoch, batch)
	if err != nil {
		return nil, err
	}
	out := make([]store.Record, len(prep))
	for i := range prep {
		out[i] = prep[i].Record
	}
	p.head = store.Head{Seq: out[len(out)-1].Seq, Hash: out[len(out)-1].Hash}
	return out, nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppendCPU is the CPU of one bench record ("journal bench"'s
// fields, a 256-byte payload) appended in batches of 16, with no I/O:
// unsealed, and sealed (its data key wrapping, sealing, envelope, and the
// writer's parse of the sealed bytes). Alternate it with an older build to
// compare them on a busy machine: ns/op is one goroutine's CPU.
func BenchmarkAppendCPU(b *testing.B) {
	ctx := context.Background()
	fields := benchappend.Fields(256)
	ring, err := keyring.OpenFile(filepath.Join(b.TempDir(), "keys"))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		wrap func(store.Journal) store.Journal
	}{
		{"unsealed", func(j store.Journal) store.Journal { return j }},
		{"sealed", func(j store.Journal) store.Journal { return sealed.New(j, ring, sealed.Options{}) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			j := tc.wrap(&parseOnly{})
			run := store.NewRunID()
			batch := make([]store.Append, 16)
			for i := range batch {
				batch[i] = store.Append{Run: run, Kind: "BenchStep", Fields: fields}
			}
			if _, err := j.Append(ctx, 1, batch[:1]); err != nil { // the scope's key
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			before := cpuTime()
			for i := 0; i < b.N; i += len(batch) {
				if _, err := j.Append(ctx, 1, batch); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time (GC included), which the machine's
			// load does not inflate as it does ns/op.
			b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/record")
		})
	}
}
