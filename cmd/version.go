package cmd

import (
	"fmt"
	"runtime"
	"runtime/debug"

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
	version, commit = Version, Commit
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, commit
	}
	if version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	if commit == "" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	return version, commit
}

func versionLine() string {
	v, c := buildVersion()
	if c != "" {
		return fmt.Sprintf("%s (commit %s, %s)", v, c, runtime.Version())
	}
	return fmt.Sprintf("%s (%s)", v, runtime.Version())
}

type versionOptions struct {
	IO   *iostreams.IOStreams
	JSON bool
}

// versionView is the --json document.
type versionView struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
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
		v, c := buildVersion()
		return render.JSON(opts.IO.Out, versionView{Version: v, Commit: c, Go: runtime.Version()})
	}
	_, err := fmt.Fprintf(opts.IO.Out, "cg version %s\n", versionLine())
	return err
}
