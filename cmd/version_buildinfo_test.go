package cmd

import (
	"runtime/debug"
	"testing"
)

// TestVersionFromBuildInfo covers what a binary built without the linker
// flags says: `go install pkg@v1.2.3` carries the module version, `go build`
// or `go install .` in a git checkout a pseudo-version and the VCS stamp,
// and a build with no stamp (-buildvcs=false, a git worktree) only "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	const rev = "f55fb66086442bd520c3b7f05607f9fb9fdbcfd2"
	stamp := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-12-01T21:38:07Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	info := func(v string, s []debug.BuildSetting) *debug.BuildInfo {
		bi := &debug.BuildInfo{Settings: s}
		bi.Main.Path, bi.Main.Version = "github.com/cg-dev/cg", v
		return bi
	}
	for _, tc := range []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            string
	}{
		{"no build info", "dev", "", nil, "dev (go1.x)"},
		{"no stamp", "dev", "", info("(devel)", nil), "dev (go1.x)"},
		{"devel with stamp", "dev", "", info("(devel)", stamp("false")),
			"dev (commit f55fb6608644, 2026-12-01T21:38:07Z, go1.x)"},
		{"checkout pseudo-version", "dev", "", info("v0.0.0-20261201213807-f55fb6608644", stamp("false")),
			"v0.0.0-20261201213807-f55fb6608644 (commit f55fb6608644, 2026-12-01T21:38:07Z, go1.x)"},
		{"dirty checkout", "dev", "", info("v0.0.0-20261201213807-f55fb6608644+dirty", stamp("true")),
			"v0.0.0-20261201213807-f55fb6608644+dirty (commit f55fb6608644, modified, 2026-12-01T21:38:07Z, go1.x)"},
		{"go install at a tag", "dev", "", info("v1.2.3", nil), "v1.2.3 (go1.x)"},
		{"linker flags win", "1.2.3", "abc1234", info("v9.9.9", nil), "1.2.3 (commit abc1234, go1.x)"},
		{"linker flags and their own stamp", "1.2.3", "f55fb66", info("(devel)", stamp("false")),
			"1.2.3 (commit f55fb66, 2026-12-01T21:38:07Z, go1.x)"},
		{"linker flags and another tree's stamp", "1.2.3", "abc1234", info("(devel)", stamp("true")),
			"1.2.3 (commit abc1234, go1.x)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildFrom(tc.version, tc.commit, tc.bi).line("go1.x"); got != tc.want {
				t.Errorf("line = %q, want %q", got, tc.want)
			}
		})
	}
	if b := buildFrom("dev", "", info("(devel)", stamp("true"))); b.Commit != rev || !b.Modified || b.Time == "" {
		t.Errorf("--json fields = %+v, want the full revision, modified and the time", b)
	}
}
