package hints

import (
	"slices"
	"strings"

	"github.com/cg-dev/cg/pkg/cg"
)

// PermissionScope is what a refused command was acting on, as far as its
// arguments say: the kind, stream, group and member ("" when unknown).
type PermissionScope struct {
	Kind                  cg.Kind
	Stream, Group, Member string
	Domain                string
}

// Permission words a refusal the server reported (its own wording, as
// nats.go delivers it): which permission is missing, publish or
// subscribe, and which role of the group has it, with the command that
// prints that role's permissions.
func Permission(server string, s PermissionScope) string {
	pe, ok := cg.ParsePermissionViolation(server)
	if !ok {
		return "permission denied: the server refused: " + server
	}
	op := "subscribe to"
	if pe.Publish {
		op = "publish to"
	}
	msg := "permission denied: this user may not " + op + " " + pe.Subject + " (the server refused it)"
	if s.Stream == "" || s.Group == "" {
		return msg + "; print the permissions a role needs with 'cg static|elastic permissions <stream> <group> --role member|operator|viewer'"
	}
	kinds := []cg.Kind{s.Kind}
	if s.Kind == "" {
		kinds = cg.Kinds()
	}
	for _, k := range kinds {
		roles := cg.RolesAllowing(k, s.Stream, s.Group, s.Member, pe.Subject, pe.Publish, cg.PermissionOptions{Domain: s.Domain})
		// A right only a dynamic member has: the member was started with
		// --dynamic, and its role is the member's with --dynamic.
		dynamic := false
		if k == cg.KindElastic && s.Member != "" && !slices.Contains(roles, cg.RoleMember) &&
			slices.Contains(cg.RolesAllowing(k, s.Stream, s.Group, s.Member, pe.Subject, pe.Publish, cg.PermissionOptions{Domain: s.Domain, Dynamic: true}), cg.RoleMember) {
			roles, dynamic = append([]cg.Role{cg.RoleMember}, roles...), true
		}
		if len(roles) == 0 {
			continue
		}
		r := roles[0]
		line := "cg " + string(k) + " permissions " + s.Stream + " " + s.Group + " --role " + string(r)
		if r == cg.RoleMember {
			line += " --member " + s.Member
			if dynamic {
				line += " --dynamic"
			}
		}
		names := make([]string, len(roles))
		for i, x := range roles {
			names[i] = string(x)
			if x == cg.RoleMember {
				names[i] += " (for " + s.Member + ")"
				if dynamic {
					names[i] = string(x) + " (for " + s.Member + ", with --dynamic)"
				}
			}
		}
		return msg + "; roles that have it: " + strings.Join(names, ", ") + " of " + string(k) + " group " + s.Group + " on " + s.Stream +
			"; print one with '" + line + "'"
	}
	return msg + "; no role of group " + s.Group + " on " + s.Stream + " has it: this user is acting outside the group its permissions are for"
}
