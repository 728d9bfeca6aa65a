package security

import (
	"testing"

	"github.com/cg-dev/cg/internal/cliproc"
)

func TestMain(m *testing.M) { cliproc.Main(m) }

type result = cliproc.Result

// run runs cg as a separate process (see cliproc.Run).
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return cliproc.Run(t, env, args...)
}
