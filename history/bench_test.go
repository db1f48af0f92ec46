package history

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkLogWriter2GB streams a 2 GiB driver log (lines of 100 bytes,
// written in the relay's 64 KiB chunks) through the history's LogWriter,
// as a step whose driver never stops printing would: the file keeps the
// first and last 2 MiB and a note of the cut, and the writer's memory
// stays at the tail it keeps whatever the log's size. It reports the
// throughput and the heap in use before the writer closes; `go test -bench LogWriter2GB -benchtime 1x
// ./history` runs it once.
func BenchmarkLogWriter2GB(b *testing.B) {
	const total = 2 << 30
	line := []byte(strings.Repeat("x", 99) + "\n")
	chunk := bytes.Repeat(line, 64<<10/len(line))
	d := Dir{Root: b.TempDir()}
	b.SetBytes(total)
	for b.Loop() {
		w, err := d.NewLogWriter("raystep-big-log-1", DefaultLogCap)
		if err != nil {
			b.Fatal(err)
		}
		var written int64
		for written < total {
			n, _ := w.Write(chunk)
			written += int64(n)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms) // the writer holds the tail it keeps, no more
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		sum := w.Close()
		if w.Err() != nil || sum.Bytes != written || sum.Kept != DefaultLogCap {
			b.Fatalf("summary %+v, err %v; want %d bytes seen, %d kept", sum, w.Err(), written, DefaultLogCap)
		}
		info, err := os.Stat(d.LogPath("raystep-big-log-1"))
		if err != nil || info.Size() < DefaultLogCap || info.Size() > DefaultLogCap+200 {
			b.Fatalf("the kept log is %d bytes (%v), want the cap and a note", info.Size(), err)
		}
	}
}
