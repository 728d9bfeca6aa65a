package group

import "testing"

// --fail-subject matches the way NATS does, on the subject with its
// partition token stripped.
func TestFailSubjectMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		want             bool
	}{
		{"orders.k7", "orders.k7", true},
		{"orders.k7", "orders.k70", false},
		{"orders.k7", "orders.k7.paid", false},
		{"orders.*", "orders.k7", true},
		{"orders.*", "orders.k7.paid", false},
		{"orders.*.paid", "orders.k7.paid", true},
		{"orders.*.paid", "orders.k7.created", false},
		{"orders.>", "orders.k7.paid", true},
		{"orders.>", "orders", false},
		{">", "orders.k7", true},
		{"*", "orders.k7", false},
		{"", "orders.k7", false},
	} {
		p := PoisonFlags{FailSubject: c.pattern}
		if got := p.fails(c.subject); got != c.want {
			t.Errorf("--fail-subject %q on %q: %v, want %v", c.pattern, c.subject, got, c.want)
		}
	}
}
