package cg_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// One exported name for one thing: the engine re-exports nothing of its
// leaf packages under a second name (no type aliases), and outside the
// file that defines Kind it names a kind by KindStatic or KindElastic,
// never by a string of its own that could drift from them.
func TestOneNameEach(t *testing.T) {
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				if n.Assign.IsValid() {
					t.Errorf("%s: type %s is an alias: use the type under its own package's name", fset.Position(n.Pos()), n.Name.Name)
				}
			case *ast.BasicLit:
				if path != "kind.go" && n.Kind == token.STRING && (n.Value == `"static"` || n.Value == `"elastic"`) {
					t.Errorf("%s: the kind spelled as %s: use KindStatic or KindElastic", fset.Position(n.Pos()), n.Value)
				}
			}
			return true
		})
	}
}
