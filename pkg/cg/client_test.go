package cg_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg"
)

func TestServerVersionRequirements(t *testing.T) {
	for _, tc := range []struct {
		version      string
		wholeSubject bool
		want         string // "" for no error
	}{
		{"2.10.22", false, "pinned consumers need nats-server 2.11 or later"},
		{"2.11.0", false, ""},
		{"2.11.4", true, "{{partition(N)}} without token indexes needs nats-server 2.12 or later"},
		{"v2.12.0-beta.1", true, ""},
		{"3.0.0", true, ""},
	} {
		v, err := cg.ParseVersion(tc.version)
		if err != nil {
			t.Fatalf("%s: %v", tc.version, err)
		}
		err = cg.CheckServerVersion(v, tc.wholeSubject)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected %v", tc.version, err)
		case tc.want != "" && (!errors.Is(err, cg.ErrServerTooOld) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "server is "+strings.TrimPrefix(strings.Split(tc.version, "-")[0], "v"))):
			t.Errorf("%s: want %q naming the version, got %v", tc.version, tc.want, err)
		}
	}
	for _, bad := range []string{"", "x", "2", "two.eleven"} {
		if _, err := cg.ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
}
