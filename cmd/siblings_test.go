package cmd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A command package uses a sibling only for its commands: helpers that
// several of them need live in internal/, so that no verb package doubles
// as a library of the others. cmd/group is used for its constructors
// (NewCmd…, AddCommands) alone, and cmd/server by nobody but the root.
func TestCommandPackagesShareNoHelpers(t *testing.T) {
	const module = "github.com/cg-dev/cg/"
	dirs, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || dir == "testdata" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, path := range files {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			names := map[string]string{} // local name → sibling package
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				sib, ok := strings.CutPrefix(p, module+"cmd/")
				if !ok || sib == dir {
					continue
				}
				if sib == "server" {
					t.Errorf("%s imports cmd/server: start a server with internal/embedded", path)
				}
				name := filepath.Base(p)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				names[name] = sib
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				id, ok := sel.X.(*ast.Ident)
				if !ok || names[id.Name] != "group" {
					return true
				}
				if x := sel.Sel.Name; !strings.HasPrefix(x, "NewCmd") && x != "AddCommands" {
					t.Errorf("%s uses cmd/group.%s: a helper several commands share belongs in internal/", fset.Position(sel.Pos()), x)
				}
				return true
			})
		}
	}
	if checked < 50 {
		t.Fatalf("read %d files under cmd/: the test no longer finds the command packages", checked)
	}
}
