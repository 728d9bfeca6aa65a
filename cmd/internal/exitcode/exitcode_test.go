package exitcode

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
