package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The committed reference is what the command tree generates now, file
// for file and byte for byte.
func TestDocsUpToDate(t *testing.T) {
	got := t.TempDir()
	if err := generate(got); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"cli", "man"} {
		if diff := compareDirs(filepath.Join(got, sub), filepath.Join("..", "..", "docs", sub)); diff != "" {
			t.Errorf("docs/%s is out of date: run 'make docs'\n%s", sub, diff)
		}
	}
}

// Generating twice gives the same bytes: nothing depends on the day.
func TestDocsDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := generate(a); err != nil {
		t.Fatal(err)
	}
	if err := generate(b); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"cli", "man"} {
		if diff := compareDirs(filepath.Join(a, sub), filepath.Join(b, sub)); diff != "" {
			t.Errorf("two runs differ in %s:\n%s", sub, diff)
		}
	}
}

func TestMarkdown(t *testing.T) {
	in := "Prose with <stream> and 'orders.*:1'.\nExits:\n  0 OK\n\n  1 WARN\nMore prose.\n\n\tsource <(cg completion bash)\n"
	want := "Prose with \\<stream\\> and 'orders.\\*:1'.\nExits:\n\n```\n  0 OK\n\n  1 WARN\n```\n\nMore prose.\n\n```\n\tsource <(cg completion bash)\n```\n"
	if got := markdown(in); got != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", got, want)
	}
}

// compareDirs names the files missing from, extra in or different in
// have compared with want, with the first line that differs.
func compareDirs(want, have string) string {
	wantFiles, err := list(want)
	if err != nil {
		return err.Error()
	}
	haveFiles, err := list(have)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, name := range wantFiles {
		if !slices.Contains(haveFiles, name) {
			out = append(out, "  missing: "+name)
			continue
		}
		w, _ := os.ReadFile(filepath.Join(want, name))
		h, _ := os.ReadFile(filepath.Join(have, name))
		if !bytes.Equal(w, h) {
			out = append(out, fmt.Sprintf("  differs: %s%s", name, firstDiff(string(w), string(h))))
		}
	}
	for _, name := range haveFiles {
		if !slices.Contains(wantFiles, name) {
			out = append(out, "  extra: "+name)
		}
	}
	return strings.Join(out, "\n")
}

func list(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

func firstDiff(want, have string) string {
	w, h := strings.Split(want, "\n"), strings.Split(have, "\n")
	for i := 0; i < len(w) || i < len(h); i++ {
		var wl, hl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(h) {
			hl = h[i]
		}
		if wl != hl {
			return fmt.Sprintf(" (line %d: generated %q, committed %q)", i+1, wl, hl)
		}
	}
	return ""
}
