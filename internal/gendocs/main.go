// Command gendocs writes cg's command reference from the command tree:
// markdown in <dir>/cli, one file per command, and man pages in <dir>/man.
// Nothing in them depends on the day or the machine, so the same tree
// always gives the same bytes; a test fails when the committed docs drift
// from the tree. Run it as `make docs`; it never dials NATS.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
)

// manDate is the date in every man page's header. It is fixed, not
// today's, so that regenerating only changes what the commands changed.
var manDate = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

const mdHeader = "<!-- Generated from the command tree by 'make docs'; do not edit. -->\n\n"

func main() {
	dir := flag.String("dir", "docs", "write the markdown to `dir`/cli and the man pages to dir/man")
	flag.Parse()
	if err := generate(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

// generate replaces dir/cli and dir/man, which hold generated files only.
func generate(dir string) error {
	cli, man := filepath.Join(dir, "cli"), filepath.Join(dir, "man")
	for _, d := range []string{cli, man} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// Each generator adds help commands to the tree it walks: a fresh one each.
	if err := doc.GenMarkdownTreeCustom(newRoot(false), cli,
		func(string) string { return mdHeader },
		func(s string) string { return s }); err != nil {
		return fmt.Errorf("markdown: %w", err)
	}
	header := &doc.GenManHeader{Section: "1", Source: "cg", Manual: "cg manual", Date: &manDate}
	if err := doc.GenManTree(newRoot(true), header, man); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	return nil
}

// newRoot builds the tree as `cg` would, on an empty environment so that
// no flag default comes from this machine, with the --version flag cobra
// adds at execution, and without cobra's "Auto generated ... on <date>".
// cobra/doc takes the help text for markdown: it is made into markdown
// that shows as the terminal does, and for man pages the synopsis and the
// flags' help too (cobra puts those in code blocks in the markdown).
func newRoot(man bool) *cobra.Command {
	ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}
	root := cmd.NewRootCmd(factory.New(ios, nil))
	root.InitDefaultVersionFlag()
	seen := map[*pflag.Flag]bool{}
	escapeFlag := func(fl *pflag.Flag) {
		if !seen[fl] {
			seen[fl] = true
			fl.Usage = escape(fl.Usage)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		c.Short = escape(c.Short)
		c.Long = markdown(c.Long)
		if man {
			name, args, _ := strings.Cut(c.Use, " ")
			if args != "" {
				c.Use = name + " " + escape(args)
			}
			c.Flags().VisitAll(escapeFlag)
			c.PersistentFlags().VisitAll(escapeFlag)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return root
}

// markdown makes help text, written for a terminal, show the same as
// markdown: prose keeps its words (markdown may reflow it), and each run of
// indented lines (a table, commands to type) becomes a fenced block that
// keeps its layout.
func markdown(s string) string {
	lines := strings.Split(s, "\n")
	indented := func(i int) bool {
		return i < len(lines) && lines[i] != "" && (lines[i][0] == ' ' || lines[i][0] == '\t')
	}
	var out []string
	for i := 0; i < len(lines); i++ {
		if !indented(i) {
			out = append(out, escape(lines[i]))
			continue
		}
		if len(out) > 0 && out[len(out)-1] != "" {
			out = append(out, "")
		}
		out = append(out, "```")
		for ; indented(i) || (i < len(lines) && lines[i] == "" && indented(i+1)); i++ {
			out = append(out, lines[i])
		}
		out = append(out, "```")
		if i < len(lines) && lines[i] != "" {
			out = append(out, "")
		}
		i--
	}
	return strings.Join(out, "\n")
}

// escape makes markdown show s as it is.
var escape = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "<", `\<`, ">", `\>`, "[", `\[`, "]", `\]`,
).Replace
