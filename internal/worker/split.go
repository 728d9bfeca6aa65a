// Package worker runs the handlers of consume that live outside cg: a
// command per message (Exec), a long-lived child speaking a line protocol
// (Long) and an HTTP endpoint (HTTP), and the naming that carries a
// message's metadata and headers to them.
package worker

import (
	"errors"
	"fmt"
	"strings"
)

// Split splits a command line into words as a POSIX shell would, without
// starting one: blanks separate words; 'single quotes' keep everything
// literally; "double quotes" keep everything but a backslash before \ " $ `
// or a newline; outside quotes a backslash keeps the next character (and a
// backslash-newline disappears). Nothing is expanded: no variables, no
// globbing, no ~. The shell's operators (| & ; < > ( ) $ `) are refused
// unquoted, since without a shell they would reach the command as
// arguments: write sh -c '...' to have a shell.
func Split(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t', '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case '\\':
			if i+1 >= len(s) {
				return nil, errors.New("ends with a lone backslash: escape it as \\\\ or quote it")
			}
			i++
			if s[i] != '\n' {
				w.WriteByte(s[i])
				inWord = true
			}
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unbalanced single quote at byte %d: close it with '", i+1)
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\\\"$`\n", s[j+1]) >= 0 {
					j++
					if s[j] != '\n' {
						w.WriteByte(s[j])
					}
					continue
				}
				w.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unbalanced double quote at byte %d: close it with \"", i+1)
			}
			i = j
			inWord = true
		case '|', '&', ';', '<', '>', '(', ')', '$', '`':
			return nil, fmt.Errorf("%q at byte %d is shell syntax, and no shell is started: quote it to pass it as it is, or run a shell, such as sh -c '...'", string(c), i+1)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	if len(words) == 0 {
		return nil, errors.New("no command: name one, such as './handle.sh' or 'python3 worker.py'")
	}
	return words, nil
}
