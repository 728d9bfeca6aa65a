package security

import (
	"testing"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, cmd.Main) }

type result = clitest.Result

// run runs cg as a separate process (see clitest.Exec).
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return clitest.Exec(t, env, args...)
}
