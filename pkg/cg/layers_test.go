package cg_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The engine is a library: it imports nothing of the CLI (cobra, color,
// the commands, the CLI plumbing), its pure partition leaf imports no
// NATS, and its health leaf imports no NATS and nothing of cg but
// partition. Metrics and tracing libraries are for the plugin packages
// only: the engine and its other packages depend on none. Checked from the source with go/parser, so it costs
// milliseconds.
var forbiddenInPkg = []string{
	"github.com/spf13/cobra",
	"github.com/spf13/pflag",
	"github.com/fatih/color",
	"github.com/cg-dev/cg/cmd",
	"github.com/cg-dev/cg/internal",
}

// cliWords finds a cg command line or a flag inside a string literal.
var cliWords = regexp.MustCompile(`\bcg (static|elastic|check|info|ls|watch|partition|server|publish|demo)\b|(^|[\s` + "`" + `'(])--[a-z][a-z-]+`)

func TestLayers(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from pkg/cg: %v", err)
	}
	pkgDir := filepath.Join(root, "pkg")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(pkgDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		rel, _ := filepath.Rel(pkgDir, path)
		rel = filepath.ToSlash(rel)
		isTest := strings.HasSuffix(path, "_test.go")
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbiddenInPkg {
				if p == bad || strings.HasPrefix(p, bad+"/") {
					t.Errorf("pkg/%s imports %s: the engine must not depend on the CLI", rel, p)
				}
			}
			if !strings.HasPrefix(rel, "cg/plugin/") && (strings.HasPrefix(p, "github.com/prometheus/") || strings.HasPrefix(p, "go.opentelemetry.io/")) {
				t.Errorf("pkg/%s imports %s: metrics and tracing libraries belong in the plugin packages (pkg/cg/plugin/...); the engine offers observer hooks", rel, p)
			}
			if strings.HasPrefix(rel, "cg/partition/") && !isTest && strings.Contains(p, "nats") {
				t.Errorf("pkg/%s imports %s: the partition package is pure and imports no NATS", rel, p)
			}
			if strings.HasPrefix(rel, "cg/health/") && !isTest && (strings.Contains(p, "nats") ||
				(strings.HasPrefix(p, "github.com/cg-dev/cg/pkg/cg") && p != "github.com/cg-dev/cg/pkg/cg/partition")) {
				t.Errorf("pkg/%s imports %s: the health package is a leaf (partition only, no NATS)", rel, p)
			}
		}
		if isTest {
			return nil
		}
		names := false
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && cliWords.MatchString(lit.Value) {
				names = true
			}
			return !names
		})
		if names {
			t.Errorf("pkg/%s names a cg command or flag in a string: the engine returns what is wrong, cmd/ words the fix (internal/hints)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("parsed only %d files under pkg/: the walk is broken", files)
	}
}
