package cmdutil

import (
	"errors"
	"fmt"
	"testing"
)

func TestCode(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, OK},
		{"plain", base, Failed},
		{"silent", ErrSilent, Failed},
		{"usage", UsageErrorf("bad %s", "flag"), Usage},
		{"wrapped usage", fmt.Errorf("context: %w", NewUsageError(base)), Usage},
	}
	for _, tt := range tests {
		if got := Code(tt.err); got != tt.want {
			t.Errorf("%s: Code = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestUsageErrorWraps(t *testing.T) {
	base := errors.New("boom")
	err := UsageErrorf("while parsing: %w", base)
	if !errors.Is(err, base) || err.Error() != "while parsing: boom" {
		t.Fatalf("got %v", err)
	}
	if NewUsageError(nil) != nil {
		t.Fatal("NewUsageError(nil) must be nil")
	}
	if again := NewUsageError(err); again != err {
		t.Fatal("NewUsageError must not double-wrap")
	}
}

func TestWithCode(t *testing.T) {
	if WithCode(CheckCritical, nil) != nil {
		t.Fatal("WithCode(nil) must be nil")
	}
	usage := WithCode(CheckUnknown, UsageErrorf("bad"))
	silent := WithCode(CheckWarning, ErrSilent)
	for _, tt := range []struct {
		err  error
		want int
	}{
		{silent, CheckWarning},
		{WithCode(CheckCritical, ErrSilent), CheckCritical},
		{usage, CheckUnknown},
		{fmt.Errorf("context: %w", WithCode(CheckUnknown, errors.New("no server"))), CheckUnknown},
	} {
		if got := Code(tt.err); got != tt.want {
			t.Errorf("Code(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	// The wrapped kinds still show: execute prints the --help hint for a
	// usage error and nothing for a silent one.
	if !IsUsage(usage) || !errors.Is(silent, ErrSilent) || NewUsageError(usage) != usage {
		t.Fatal("a coded error must keep what it wraps")
	}
}
