// Flag values that refuse bad input with a message saying what was wrong
// and what a good value looks like.
package cmdutil

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Duration is a non-negative duration flag that needs a unit.
type Duration struct {
	p       *time.Duration
	example string
}

// DurationVar binds a non-negative duration flag; example is a good value
// shown when a bad one is given (such as "25ms").
func DurationVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, example, usage string) {
	*p = def
	fs.Var(&Duration{p: p, example: example}, name, usage)
}

func (d *Duration) String() string { return d.p.String() }
func (d *Duration) Type() string   { return "duration" }

// Set parses s, refusing unit-less numbers and negative durations.
func (d *Duration) Set(s string) error {
	v, err := ParseDuration(s, d.example)
	if err != nil {
		return err
	}
	*d.p = v
	return nil
}

// ParseDuration parses a non-negative duration with a unit.
func ParseDuration(s, example string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return 0, fmt.Errorf("%q has no unit; write it with one, such as %s", s, example)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; write one such as %s", s, example)
	}
	if v < 0 {
		return 0, fmt.Errorf("%q is negative; write a positive duration such as %s", s, example)
	}
	return v, nil
}

// Count is a non-negative integer flag.
type Count struct {
	p       *int
	min     int
	example string
}

// CountVar binds an integer flag of at least min.
func CountVar(fs *pflag.FlagSet, p *int, name string, def, min int, example, usage string) {
	*p = def
	fs.Var(&Count{p: p, min: min, example: example}, name, usage)
}

func (c *Count) String() string { return strconv.Itoa(*c.p) }
func (c *Count) Type() string   { return "int" }

// Set parses s, refusing values below the minimum.
func (c *Count) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a whole number; write one such as %s", s, c.example)
	}
	if v < c.min {
		return fmt.Errorf("%d is below the minimum %d; write one such as %s", v, c.min, c.example)
	}
	*c.p = v
	return nil
}

// Int64 is a 64-bit integer flag with a minimum, for sizes and caps.
type Int64 struct {
	p       *int64
	min     int64
	example string
}

// Int64Var binds a 64-bit integer flag of at least min.
func Int64Var(fs *pflag.FlagSet, p *int64, name string, def, min int64, example, usage string) {
	*p = def
	fs.Var(&Int64{p: p, min: min, example: example}, name, usage)
}

func (c *Int64) String() string { return strconv.FormatInt(*c.p, 10) }
func (c *Int64) Type() string   { return "int" }

// Set parses s, refusing values below the minimum.
func (c *Int64) Set(s string) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number; write one such as %s", s, c.example)
	}
	if v < 0 && c.min == 0 {
		return fmt.Errorf("%d is negative; write 0 or more, such as %s", v, c.example)
	}
	if v < c.min {
		return fmt.Errorf("%d is below the minimum %d; write one such as %s", v, c.min, c.example)
	}
	*c.p = v
	return nil
}
