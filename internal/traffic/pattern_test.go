package traffic

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct{ in, key, want string }{
		{"orders.{key}", "k1", "orders.k1"},
		{"orders.{key}.created", "k1", "orders.k1.created"},
		{"shop.cust-{key}", "k1", "shop.cust-k1"},
		{"{key}", "k1", "k1"},
		{"orders.*", "k1", "orders.k1"},
		{"*.orders", "k1", "k1.orders"},
		{"a.*.b", "k1", "a.k1.b"},
		{"*", "k1", "k1"},
	} {
		p, err := ParsePattern(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := p.Subject(tc.key); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	if p, _ := ParsePattern("orders.*"); p.String() != "orders.{key}" {
		t.Errorf("String() = %q", p.String())
	}
}

func TestParsePatternRejects(t *testing.T) {
	for _, tc := range []struct{ in, says string }{
		{"", "empty"},
		{"orders", "no place for the key"},
		{"orders.*.*", "2 '*' tokens"},
		{"orders.>", "'>'"},
		{"orders.{key}.>", "'>'"},
		{"orders.{key}.{key}", "2 times"},
		{"orders.*.{key}", "both"},
		{"orders..{key}", "empty token"},
		{"orders.a*", "stand alone"},
		{"orders. {key}", "white space"},
	} {
		_, err := ParsePattern(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: got %v, want an error saying %q", tc.in, err, tc.says)
		}
	}
}

func TestKeys(t *testing.T) {
	got := Keys("k", 3)
	if strings.Join(got, ",") != "k0001,k0002,k0003" {
		t.Fatalf("keys %v", got)
	}
	if got := Keys("cust-", 12345); got[0] != "cust-00001" || got[12344] != "cust-12345" {
		t.Fatalf("wide keys %s %s", got[0], got[12344])
	}
	if len(Keys("k", 0)) != 0 {
		t.Fatal("zero keys")
	}
}

func TestValidateKey(t *testing.T) {
	for _, bad := range []string{"", "a.b", "a*", ">", "a b"} {
		if ValidateKey(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := ValidateKey("alice-1_2"); err != nil {
		t.Fatal(err)
	}
}

func TestKeyOf(t *testing.T) {
	h := nats.Header{}
	h.Set(KeyHeader, "k1")
	h.Set(KeySeqHeader, "42")
	if k, s, ok := KeyOf(h); !ok || k != "k1" || s != 42 {
		t.Fatalf("KeyOf = %q %d %v", k, s, ok)
	}
	for _, bad := range []nats.Header{nil, {}, {KeyHeader: {"k"}}, {KeyHeader: {"k"}, KeySeqHeader: {"0"}}, {KeyHeader: {"k"}, KeySeqHeader: {"x"}}, {KeySeqHeader: {"1"}}} {
		if _, _, ok := KeyOf(bad); ok {
			t.Errorf("KeyOf(%v) ok", bad)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"0": 0, "10/s": 10, "2.5/s": 2.5, "600/m": 10, "600/min": 10, "3600/h": 1, "0/s": 0, " 5/s ": 5} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, says := range map[string]string{"10": "no unit", "fast": "not a rate", "-1/s": "negative", "x/s": "number", "10/d": "unknown unit", "": "not a rate", "NaN/s": "number"} {
		_, err := ParseRate(in)
		if err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "10/s") {
			t.Errorf("ParseRate(%q): got %v, want an error saying %q with an example", in, err, says)
		}
	}
	var r float64
	v := RateValue{P: &r}
	if err := v.Set("20/s"); err != nil || r != 20 || v.String() != "20/s" || v.Type() != "rate" {
		t.Fatalf("RateValue: %v %v %q", err, r, v.String())
	}
}
