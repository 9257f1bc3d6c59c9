package disclosure

import (
	"bufio"
	"bytes"
	"os"
	"testing"
)

// BenchmarkExamineBody measures the body check of the record lines of a
// bench package (every record stamped with a case, as cmd/auditor's bench
// writes them), one worker, with its allocations: the per-record cost the
// workers pay beside the file's digest.
func BenchmarkExamineBody(b *testing.B) {
	path, _ := benchPackage(b, 50, 20, 900)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var raws [][]byte
	var size int64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, MaxLine)
	for sc.Scan() {
		if _, raw, err := parseRecordLine(sc.Bytes()); err == nil && bytes.HasPrefix(sc.Bytes(), recordLinePrefix) {
			raws = append(raws, bytes.Clone(raw))
			size += int64(len(raw))
		}
	}
	if len(raws) == 0 {
		b.Fatal("no records")
	}
	x := (&examiner{}).worker()
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, raw := range raws {
			if rec := examineBody(raw, &x.cache, nil); rec.err != nil {
				b.Fatal(rec.err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(raws)), "ns/record")
}
