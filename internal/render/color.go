package render

import (
	"hash/fnv"

	"github.com/fatih/color"
)

// memberPalette avoids red, which is kept for errors and failures.
var memberPalette = []color.Attribute{
	color.FgCyan,
	color.FgMagenta,
	color.FgYellow,
	color.FgGreen,
	color.FgBlue,
	color.FgHiCyan,
	color.FgHiMagenta,
	color.FgHiGreen,
}

// ColorScheme colors strings when color is enabled and returns them
// unchanged when it is not.
type ColorScheme struct{ enabled bool }

// NewColorScheme returns a scheme that colors only when enabled is true;
// pass IOStreams.ColorEnabled().
func NewColorScheme(enabled bool) *ColorScheme { return &ColorScheme{enabled: enabled} }

// Enabled reports whether the scheme emits ANSI colors.
func (cs *ColorScheme) Enabled() bool { return cs.enabled }

// MemberColor returns the colorizer for a member name. The choice depends
// only on the name, so a member has the same color in every command and
// every run.
func (cs *ColorScheme) MemberColor(name string) func(string) string {
	return cs.paint(memberPalette[memberIndex(name)])
}

// memberIndex is the member's place in memberPalette (and in
// memberHexPalette, so the dashboard shows the same colour).
func memberIndex(name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(len(memberPalette)))
}

// Member returns name in its member color.
func (cs *ColorScheme) Member(name string) string { return cs.MemberColor(name)(name) }

// Bold is for headings and emphasis.
func (cs *ColorScheme) Bold(s string) string { return cs.paint(color.Bold)(s) }

// Faint is for secondary details.
func (cs *ColorScheme) Faint(s string) string { return cs.paint(color.Faint)(s) }

// Green is for success and healthy states.
func (cs *ColorScheme) Green(s string) string { return cs.paint(color.FgGreen)(s) }

// Yellow is for warnings and transitional states.
func (cs *ColorScheme) Yellow(s string) string { return cs.paint(color.FgYellow)(s) }

// Red is for errors and failed states.
func (cs *ColorScheme) Red(s string) string { return cs.paint(color.FgRed)(s) }

func (cs *ColorScheme) paint(attr color.Attribute) func(string) string {
	if !cs.enabled {
		return func(s string) string { return s }
	}
	c := color.New(attr)
	// Per-instance override: fatih/color's global default looks at the
	// real os.Stdout, which is not necessarily where this output goes.
	c.EnableColor()
	return func(s string) string { return c.Sprint(s) }
}
