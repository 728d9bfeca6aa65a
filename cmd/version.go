package cmd

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/internal/render"
)

// Set at build time:
//
//	go build -ldflags "-X github.com/cg-dev/cg/cmd.Version=v1.2.3 -X github.com/cg-dev/cg/cmd.Commit=abc1234"
var (
	Version = "dev"
	Commit  = ""
)

// buildVersion falls back on what the Go toolchain recorded (go install
// pkg@v1.2.3, VCS stamping) when the linker flags were not given.
func buildVersion() (version, commit string) {
	b := readBuild()
	return b.Version, b.Commit
}

// build is what `cg version` can say about the binary.
type build struct {
	Version  string // release, module (pseudo-)version, or "dev"
	Commit   string // linker flag or vcs.revision
	Time     string // vcs.time (RFC 3339), when the toolchain stamped it
	Modified bool   // vcs.modified: built from a tree with uncommitted changes
}

func readBuild() build {
	bi, _ := debug.ReadBuildInfo()
	return buildFrom(Version, Commit, bi)
}

// buildFrom prefers the linker flags, then the module version (go install
// pkg@v1.2.3, or a pseudo-version when `go build`/`go install .` ran in a
// git checkout with VCS stamping on), then the VCS stamp, as gh does. A
// build with no stamp at all (-buildvcs=false, a git worktree, a source
// tarball) stays "dev": there is nothing truer to say.
func buildFrom(version, commit string, bi *debug.BuildInfo) build {
	b := build{Version: version, Commit: commit}
	if bi == nil {
		return b
	}
	if b.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		b.Version = bi.Main.Version
	}
	var revision string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	if b.Commit == "" {
		b.Commit = revision
	} else if revision == "" || !strings.HasPrefix(revision, b.Commit) {
		// The stamp describes another tree than the flags; keep the flags'.
		b.Time, b.Modified = "", false
	}
	return b
}

func versionLine() string {
	return readBuild().line(runtime.Version())
}

func (b build) line(goVersion string) string {
	var parts []string
	if b.Commit != "" {
		c := "commit " + shortCommit(b.Commit)
		if b.Modified {
			c += ", modified"
		}
		parts = append(parts, c)
	}
	if b.Time != "" {
		parts = append(parts, b.Time)
	}
	parts = append(parts, goVersion)
	return fmt.Sprintf("%s (%s)", b.Version, strings.Join(parts, ", "))
}

// shortCommit shortens a full git revision to 12 characters, as Go's
// pseudo-versions do; a commit given by the linker flags is kept as it is.
func shortCommit(c string) string {
	if len(c) == 40 {
		return c[:12]
	}
	return c
}

type versionOptions struct {
	IO   *iostreams.IOStreams
	JSON bool
}

// versionView is the --json document.
type versionView struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Time and Modified come from the toolchain's VCS stamp, when there is one.
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

func newCmdVersion(f *factory.Factory) *cobra.Command {
	opts := &versionOptions{IO: f.IOStreams}
	return &cobra.Command{
		Use:     "version",
		Short:   "Print cg's version",
		Example: "  cg version\n  cg version --json",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			opts.JSON = f.JSON
			return versionRun(opts)
		},
	}
}

func versionRun(opts *versionOptions) error {
	if opts.JSON {
		b := readBuild()
		return render.JSON(opts.IO.Out, versionView{Version: b.Version, Commit: b.Commit, Time: b.Time, Modified: b.Modified, Go: runtime.Version()})
	}
	_, err := fmt.Fprintf(opts.IO.Out, "cg version %s\n", versionLine())
	return err
}
