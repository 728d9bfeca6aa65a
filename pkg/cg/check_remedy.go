package cg

import "github.com/cg-dev/cg/pkg/cg/health"

// remedy is the fix code for the checked group, with its place filled in.
func (t checkTarget) remedy(code health.RemedyCode) *health.Remedy {
	return &health.Remedy{Code: code, Kind: t.kind.String(), Stream: t.stream, Group: t.group}
}

// recreate is RemedyDeleteAndCreate for the checked group, lead and tail
// being the engine wording around the fix.
func (t checkTarget) recreate(lead, tail string) *health.Remedy {
	r := t.remedy(health.RemedyDeleteAndCreate)
	r.Lead, r.Tail = lead, tail
	return r
}
