package cg_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The file that defines Member is the runtime alone: it names no delivery
// stage (stages are plug-ins described in stage.go), in any identifier or
// string, comments aside.
func TestLayersMemberNamesNoStage(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	stage := regexp.MustCompile(`(?i)batch|lane|poison`)
	found := false
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(".", name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		defines := false
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					if s.(*ast.TypeSpec).Name.Name == "Member" {
						defines = true
					}
				}
			}
		}
		if !defines {
			continue
		}
		found = true
		ast.Inspect(f, func(n ast.Node) bool {
			var text string
			switch x := n.(type) {
			case *ast.Ident:
				text = x.Name
			case *ast.BasicLit:
				text = x.Value
			default:
				return true
			}
			if stage.MatchString(text) {
				t.Errorf("%s (which defines Member) names a stage: %s at %s; move it to the stage's file or stage.go", name, text, fset.Position(n.Pos()))
			}
			return true
		})
	}
	if !found {
		t.Fatal("no file defines type Member")
	}
}
