// Package cmdutil holds the CLI's shared rules: exit codes, flag values
// that refuse bad input plainly, and error wording.
//
// Code decides, in one place, what cg's exit status is for the
// error a command returned, and gives commands the error kinds that change
// it: usage errors (exit 2, with a hint to read --help), silent errors
// (exit 1, for a command that already told the user what went wrong), and
// coded errors, for a command whose status follows another convention
// (cg check: the monitoring plugins' 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).
package cmdutil

import (
	"errors"
	"fmt"
)

// Exit statuses.
const (
	OK     = 0 // success, including a consumer stopped by SIGINT/SIGTERM
	Failed = 1 // the operation failed
	Usage  = 2 // the command line is wrong: unknown command or flag, bad value, wrong arguments
)

// Statuses of a health check, as monitoring plugins (Nagios, Icinga,
// Sensu...) report them. Only commands that say so use them, through
// WithCode.
const (
	CheckOK       = 0 // every check passed
	CheckWarning  = 1 // something needs attention
	CheckCritical = 2 // something is broken
	CheckUnknown  = 3 // could not check: no server, no permission, or bad usage
)

// CodedError carries the exit status its command chose. It wraps: a coded
// usage error still prints the --help hint, and a coded ErrSilent prints
// nothing.
type CodedError struct {
	Code int
	Err  error
}

func (e *CodedError) Error() string { return e.Err.Error() }
func (e *CodedError) Unwrap() error { return e.Err }

// WithCode makes err exit with code; nil stays nil.
func WithCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &CodedError{Code: code, Err: err}
}

// UsageError is an error in how cg was invoked. It exits 2 and is followed
// by a hint to run the command's --help.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// UsageErrorf returns a UsageError with a formatted message; %w wraps.
func UsageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// NewUsageError marks err as a usage error; nil stays nil.
func NewUsageError(err error) error {
	if err == nil {
		return nil
	}
	var u *UsageError
	if errors.As(err, &u) {
		return err
	}
	return &UsageError{Err: err}
}

// IsUsage reports whether err is, or wraps, a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// ErrSilent fails the command (exit 1) without printing anything more:
// return it when the command has already written its own error output.
var ErrSilent = errors.New("silent error")

// Code is the exit status for err.
func Code(err error) int {
	var coded *CodedError
	switch {
	case err == nil:
		return OK
	case errors.As(err, &coded):
		return coded.Code
	case IsUsage(err):
		return Usage
	default:
		return Failed
	}
}
