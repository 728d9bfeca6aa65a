// Package iostreams carries the standard streams of one cg invocation and
// the decisions that depend on them (terminal or not, color or not), so
// commands never look at os.Stdout or the environment themselves and tests
// can run them against buffers.
package iostreams

import (
	"bytes"
	"io"
	"os"

	"github.com/mattn/go-colorable"
	"github.com/mattn/go-isatty"
)

// IOStreams is where a command reads input and writes output: data on Out,
// confirmations, progress and errors on ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY  bool
	stdoutTTY bool
	color     bool
}

// System returns the process's streams, with color decided from the
// environment and whether standard output is a terminal.
func System() *IOStreams {
	stdoutTTY := isTerminal(os.Stdout)
	return &IOStreams{
		In: os.Stdin,
		// colorable translates ANSI sequences on old Windows consoles and
		// is os.Stdout elsewhere.
		Out:       colorable.NewColorable(os.Stdout),
		ErrOut:    colorable.NewColorable(os.Stderr),
		stdinTTY:  isTerminal(os.Stdin),
		stdoutTTY: stdoutTTY,
		color:     ColorFromEnv(os.Getenv, stdoutTTY),
	}
}

// Test returns streams backed by buffers: no terminal, no color. The
// buffers are the ones behind In, Out and ErrOut.
func Test() (ios *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// ColorFromEnv is the color rule, applied once per invocation: NO_COLOR
// (any value) turns color off, CLICOLOR_FORCE (other than "0") turns it
// on, and otherwise color needs a terminal on stdout that is not TERM=dumb.
func ColorFromEnv(env func(string) string, stdoutTTY bool) bool {
	if env("NO_COLOR") != "" {
		return false
	}
	if v := env("CLICOLOR_FORCE"); v != "" && v != "0" {
		return true
	}
	if env("TERM") == "dumb" {
		return false
	}
	return stdoutTTY
}

// ColorEnabled reports whether output may carry ANSI colors.
func (s *IOStreams) ColorEnabled() bool { return s.color }

// SetColorEnabled overrides the color decision (--no-color, tests).
func (s *IOStreams) SetColorEnabled(on bool) { s.color = on }

// IsStdinTTY reports whether standard input is a terminal.
func (s *IOStreams) IsStdinTTY() bool { return s.stdinTTY }

// IsStdoutTTY reports whether standard output is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// SetStdinTTY marks standard input as a terminal or not (tests).
func (s *IOStreams) SetStdinTTY(tty bool) { s.stdinTTY = tty }

// SetStdoutTTY marks standard output as a terminal or not (tests).
func (s *IOStreams) SetStdoutTTY(tty bool) { s.stdoutTTY = tty }

// CanPrompt reports whether a command may ask the user a question: only
// when both standard input and standard output are terminals, so scripts
// and pipes never hang on a prompt.
func (s *IOStreams) CanPrompt() bool { return s.stdinTTY && s.stdoutTTY }

func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
