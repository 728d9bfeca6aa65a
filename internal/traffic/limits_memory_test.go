package traffic

import (
	"os"
	"runtime"
	"testing"
)

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestMeasureKeyMemory measures what a key costs a publisher that used it
// (its name, the duplicate check, the per-key sequence and count), the
// measurement MaxKeys is chosen from. Run it with
//
//	CG_MEASURE_MEMORY=1 go test -run TestMeasureKeyMemory -v ./internal/traffic/
func TestMeasureKeyMemory(t *testing.T) {
	if os.Getenv("CG_MEASURE_MEMORY") == "" {
		t.Skip("set CG_MEASURE_MEMORY=1 to measure memory per key")
	}
	js := stream(t)
	for _, n := range []int{1000, 100000} {
		before := heapInUse()
		p, err := NewPublisher(js, Options{Subject: "orders.*", Keys: Keys("k", n), Count: n})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Run(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		used := heapInUse() - before
		t.Logf("%6d keys, each published once: %8.1f KB (%.0f B per key)", n, float64(used)/1024, float64(used)/float64(n))
		runtime.KeepAlive(p)
	}
}
