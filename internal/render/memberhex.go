package render

import "github.com/fatih/color"

// memberHex is the web colour standing for each ANSI colour of
// memberPalette, picked to read well on a light and a dark page.
var memberHex = map[color.Attribute]string{
	color.FgCyan:      "#0891b2",
	color.FgMagenta:   "#c026d3",
	color.FgYellow:    "#ca8a04",
	color.FgGreen:     "#16a34a",
	color.FgBlue:      "#2563eb",
	color.FgHiCyan:    "#22d3ee",
	color.FgHiMagenta: "#e879f9",
	color.FgHiGreen:   "#4ade80",
}

// MemberAttr is the ANSI colour a member's name is shown in (what
// MemberColor paints with).
func MemberAttr(name string) color.Attribute { return memberPalette[memberIndex(name)] }

// MemberHex is the member's colour as "#rrggbb": the web form of the ANSI
// colour the CLI shows the member in, so the dashboard and the terminal
// agree.
func MemberHex(name string) string { return memberHex[MemberAttr(name)] }
