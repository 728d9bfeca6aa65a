package hints

import (
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg"
)

func TestPermissionNamesTheRole(t *testing.T) {
	for _, c := range []struct {
		server string
		scope  PermissionScope
		want   []string
	}{
		{`Permissions Violation for Publish to "$JS.API.CONSUMER.MSG.NEXT.ORDERS.g-m1"`,
			PermissionScope{Kind: cg.KindStatic, Stream: "ORDERS", Group: "g", Member: "m1"},
			[]string{"may not publish to $JS.API.CONSUMER.MSG.NEXT.ORDERS.g-m1", "roles that have it: member (for m1)", "'cg static permissions ORDERS g --role member --member m1'"}},
		{`Permissions Violation for Publish to "$JS.API.STREAM.DELETE.ORDERS-g"`,
			PermissionScope{Kind: cg.KindElastic, Stream: "ORDERS", Group: "g"},
			[]string{"roles that have it: operator of elastic group g", "--role operator'"}},
		{`Permissions Violation for Subscription to "$JS.EVENT.ADVISORY.CONSUMER.PINNED.ORDERS.*"`,
			PermissionScope{Kind: cg.KindStatic, Stream: "ORDERS", Group: "g"},
			[]string{"may not subscribe to $JS.EVENT.ADVISORY.CONSUMER.PINNED.ORDERS.*", "operator, viewer"}},
		{`Permissions Violation for Publish to "$KV.static-consumer-groups.ORDERS.g2"`,
			PermissionScope{Kind: cg.KindStatic, Stream: "ORDERS", Group: "g", Member: "m1"},
			[]string{"no role of group g on ORDERS has it"}},
		{`Permissions Violation for Publish to "$KV.elastic-consumer-groups.ORDERS.g"`,
			PermissionScope{Kind: cg.KindElastic, Stream: "ORDERS", Group: "g", Member: "m1"},
			[]string{"roles that have it: member (for m1, with --dynamic), operator of elastic group g", "'cg elastic permissions ORDERS g --role member --member m1 --dynamic'"}},
		{`Permissions Violation for Publish to "$JS.API.STREAM.INFO.KV_cg-dynamic-members"`,
			PermissionScope{Kind: cg.KindElastic, Stream: "ORDERS", Group: "g", Member: "m1"},
			[]string{"roles that have it: member (for m1, with --dynamic), operator, viewer"}},
		{`Permissions Violation for Publish to "$JS.API.INFO"`, PermissionScope{},
			[]string{"may not publish to $JS.API.INFO", "cg static|elastic permissions"}},
	} {
		got := Permission(c.server, c.scope)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("Permission(%q) = %q, want it to say %q", c.server, got, w)
			}
		}
	}
}
