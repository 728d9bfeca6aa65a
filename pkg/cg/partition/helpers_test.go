package partition

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// testSeed returns the seed a randomized test uses: CG_TEST_SEED when set
// (to replay a failure), otherwise the clock. It is logged either way.
// (Package cg's tests have the same helper.)
func testSeed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CG_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CG_TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with CG_TEST_SEED=%d)", seed, seed)
	return seed
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
