package traffic

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRate reads a message rate written with its unit: 10/s, 2.5/s,
// 600/m (or /min), 3600/h. "0" alone means as fast as possible.
func ParseRate(s string) (float64, error) {
	const example = "write a rate such as 10/s or 600/m (0 for as fast as possible)"
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	num, unit, ok := strings.Cut(s, "/")
	if !ok {
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return 0, fmt.Errorf("rate %q has no unit; %s", s, example)
		}
		return 0, fmt.Errorf("rate %q is not a rate; %s", s, example)
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n != n { // NaN
		return 0, fmt.Errorf("rate %q does not start with a number; %s", s, example)
	}
	var per float64
	switch strings.TrimSpace(unit) {
	case "s", "sec":
		per = 1
	case "m", "min":
		per = 60
	case "h", "hr":
		per = 3600
	default:
		return 0, fmt.Errorf("rate %q has unknown unit %q; %s", s, unit, example)
	}
	if n < 0 {
		return 0, fmt.Errorf("rate %q is negative; %s", s, example)
	}
	if n > 1e9 {
		return 0, fmt.Errorf("rate %q is too high; %s", s, example)
	}
	return n / per, nil
}

// FormatRate writes a rate as ParseRate reads it.
func FormatRate(r float64) string {
	if r == 0 {
		return "0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}

// RateValue is a pflag.Value for a rate flag.
type RateValue struct{ P *float64 }

func (v RateValue) String() string {
	if v.P == nil {
		return "0"
	}
	return FormatRate(*v.P)
}

// Set parses s with ParseRate.
func (v RateValue) Set(s string) error {
	r, err := ParseRate(s)
	if err != nil {
		return err
	}
	*v.P = r
	return nil
}

// Type names the value in help.
func (v RateValue) Type() string { return "rate" }
