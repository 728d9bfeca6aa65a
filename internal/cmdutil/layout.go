package cmdutil

import (
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/pkg/cg"
)

// BindLayout binds create's --layout flag.
func BindLayout(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "layout", "member", "who reads which partition: 'member' (one consumer per member, the reference's format, readable by it) or 'partition' (one consumer per partition: fast over backlogs of many keys, cg only; see docs/layouts.md)")
}

// ParseLayout reads --layout; a bad value is a usage error.
func ParseLayout(s string) (cg.Layout, error) {
	l, err := cg.ParseLayout(s)
	if err != nil {
		return "", UsageErrorf("--layout %q is not a layout: use member (the default) or partition", s)
	}
	return l, nil
}
