package dashboard

import "github.com/cg-dev/cg/internal/render"

// MemberColor is the member's colour as "#rrggbb": the web form of the
// ANSI colour the CLI shows the member's name in.
func MemberColor(name string) string { return render.MemberHex(name) }
