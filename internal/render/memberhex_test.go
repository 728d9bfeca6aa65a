package render

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/fatih/color"
)

// TestMemberHexAgreesWithCLI: the dashboard's colour of a member is the
// web form of the very ANSI colour the CLI paints the member's name in.
func TestMemberHexAgreesWithCLI(t *testing.T) {
	cs := NewColorScheme(true)
	hex := regexp.MustCompile(`^#[0-9a-f]{6}$`)
	seen := map[string]bool{}
	for i := range 200 {
		name := fmt.Sprintf("m%d", i)
		want := color.New(MemberAttr(name))
		want.EnableColor()
		if got := cs.Member(name); got != want.Sprint(name) {
			t.Fatalf("%s: CLI paints %q, MemberAttr says %q", name, got, want.Sprint(name))
		}
		h := MemberHex(name)
		if !hex.MatchString(h) {
			t.Fatalf("%s: MemberHex %q is not #rrggbb", name, h)
		}
		if h != memberHex[MemberAttr(name)] {
			t.Fatalf("%s: hex %s does not stand for its ANSI colour", name, h)
		}
		seen[h] = true
	}
	if len(seen) != len(memberPalette) {
		t.Fatalf("200 names used %d colours, want all %d", len(seen), len(memberPalette))
	}
	for _, a := range memberPalette {
		if memberHex[a] == "" || strings.ToLower(memberHex[a]) != memberHex[a] {
			t.Fatalf("ANSI colour %v has no lowercase hex", a)
		}
	}
}
