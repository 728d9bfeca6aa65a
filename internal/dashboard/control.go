package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// ControlRequest is the JSON body of the control endpoints.
type ControlRequest struct {
	Kind       string `json:"kind,omitempty"` // step-down: static or elastic
	Stream     string `json:"stream"`
	Group      string `json:"group"`
	Member     string `json:"member"`
	Partitions []int  `json:"partitions,omitempty"`
	// Members is the member list mapping/delete goes back to (default:
	// the members the mappings named), as delete-mapping's arguments.
	Members []string `json:"members,omitempty"`
}

// ControlReply is the JSON reply of a control.
type ControlReply struct {
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
	// PrevPinID is the pin a step-down released.
	PrevPinID string `json:"prev_pin_id,omitempty"`
	// Moves are the partitions that changed owner.
	Moves []Move `json:"moves,omitempty"`
	// Note says what else happened (nothing was pinned, already a member).
	Note string `json:"note,omitempty"`
}

type controlFunc func(ctx context.Context, req ControlRequest) (ControlReply, error)

func (s *Server) controls(mux *http.ServeMux) {
	for path, fn := range map[string]controlFunc{
		"/api/elastic/add":    s.elasticAdd,
		"/api/elastic/drop":   s.elasticDrop,
		"/api/mapping/create": s.mappingCreate,
		"/api/mapping/delete": s.mappingDelete,
		"/api/step-down":      s.stepDown,
	} {
		mux.HandleFunc("POST "+path, s.control(fn))
	}
}

// errBadRequest marks input the dashboard refuses before calling the engine.
var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...)
}

func reply(w http.ResponseWriter, code int, r ControlReply) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(r)
}

// control wraps a control: the same-origin check, read-only, the JSON body,
// the engine call and the reply.
func (s *Server) control(fn controlFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if why := foreign(r); why != "" {
			reply(w, http.StatusForbidden, ControlReply{Error: why})
			return
		}
		if s.opts.ReadOnly {
			reply(w, http.StatusForbidden, ControlReply{Error: "the dashboard is read-only: its controls are turned off"})
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			reply(w, http.StatusUnsupportedMediaType, ControlReply{Error: "send the request as JSON (Content-Type: application/json)"})
			return
		}
		var req ControlRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			reply(w, http.StatusBadRequest, ControlReply{Error: "the body is not the JSON expected: " + err.Error()})
			return
		}
		if s.opts.Stream != "" && req.Stream != s.opts.Stream || s.opts.Group != "" && req.Group != s.opts.Group {
			reply(w, http.StatusForbidden, ControlReply{Error: fmt.Sprintf("group %s on %s is not in this dashboard's view", req.Group, req.Stream)})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		defer cancel()
		rep, err := fn(ctx, req)
		if err != nil {
			code := http.StatusConflict
			var ve *cg.ValidationError
			if errors.Is(err, errBadRequest) || errors.Is(err, cg.ErrInvalidConfig) || errors.As(err, &ve) {
				code = http.StatusBadRequest
			}
			if errors.Is(err, cg.ErrGroupNotFound) || errors.Is(err, cg.ErrStreamNotFound) || errors.Is(err, cg.ErrMemberNotFound) {
				code = http.StatusNotFound
			}
			msg := hints.Error(err)
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[:i]
			}
			reply(w, code, ControlReply{Error: msg})
			return
		}
		s.opts.Logf("dashboard: %s %s/%s %s: ok", r.URL.Path, req.Stream, req.Group, req.Member)
		s.relist.Store(true)
		s.kick()
		rep.OK = true
		reply(w, http.StatusOK, rep)
	}
}

// foreign says why a request may not drive the controls, "" when it may:
// a browser's request must come from the dashboard's own page (its Origin
// the dashboard's own), and the Host must be an address or localhost, so a
// page of another site reaching the port through a DNS name it controls
// (DNS rebinding) is refused too.
func foreign(r *http.Request) string {
	host := r.Host
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	if net.ParseIP(name) == nil && !strings.EqualFold(name, "localhost") {
		return fmt.Sprintf("controls answer only at an address (such as http://127.0.0.1:PORT/), not at host %q", host)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return "refused: the request came from another site (" + site + ")"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "" // not a browser's cross-site request (curl, scripts)
	}
	u, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(u.Host, host) || u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Sprintf("refused: origin %s is not this dashboard's", origin)
	}
	return ""
}

func need(req ControlRequest, fields ...string) error {
	var missing []string
	for _, f := range fields {
		var v string
		switch f {
		case "stream":
			v = req.Stream
		case "group":
			v = req.Group
		case "member":
			v = req.Member
		case "kind":
			v = req.Kind
		}
		if v == "" {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return badRequest("give %s in the JSON body", strings.Join(missing, ", "))
	}
	return nil
}

func movesOf(mc cg.MembershipChange) []Move {
	var out []Move
	for _, m := range mc.Moves {
		out = append(out, Move{Partition: m.Partition, From: m.From, To: m.To})
	}
	return out
}

// elasticAdd adds a member to an elastic group (Client.AddMembers, as
// `elastic add`); with partitions, it maps those partitions to the member
// instead (as mapping/create).
func (s *Server) elasticAdd(ctx context.Context, req ControlRequest) (ControlReply, error) {
	if err := need(req, "stream", "group", "member"); err != nil {
		return ControlReply{}, err
	}
	if len(req.Partitions) > 0 {
		return s.mappingCreate(ctx, req)
	}
	mc, err := s.client.AddMembers(ctx, req.Stream, req.Group, []string{req.Member})
	if err != nil {
		return ControlReply{}, err
	}
	rep := ControlReply{Moves: movesOf(mc)}
	if len(mc.Changed) == 0 {
		rep.Note = req.Member + " is already a member"
	}
	return rep, nil
}

// elasticDrop drops a member of an elastic group (Client.DropMembers).
func (s *Server) elasticDrop(ctx context.Context, req ControlRequest) (ControlReply, error) {
	if err := need(req, "stream", "group", "member"); err != nil {
		return ControlReply{}, err
	}
	mc, err := s.client.DropMembers(ctx, req.Stream, req.Group, []string{req.Member})
	if err != nil {
		return ControlReply{}, err
	}
	if len(mc.Changed) == 0 {
		return ControlReply{}, badRequest("%s is not a member of elastic group %s", req.Member, req.Group)
	}
	return ControlReply{Moves: movesOf(mc)}, nil
}

// mappingCreate gives member the partitions named, taking them from their
// owners, and stores the group's ownership as member mappings
// (Client.SetMappings, as `elastic create-mapping` with every member's
// mapping written out). A member left with no partition leaves the group.
func (s *Server) mappingCreate(ctx context.Context, req ControlRequest) (ControlReply, error) {
	if err := need(req, "stream", "group", "member"); err != nil {
		return ControlReply{}, err
	}
	if len(req.Partitions) == 0 {
		return ControlReply{}, badRequest("give the member's partitions, such as \"partitions\":[0,1]")
	}
	cfg, err := s.client.ElasticConfig(ctx, req.Stream, req.Group)
	if err != nil {
		return ControlReply{}, err
	}
	n := cfg.PartitionCount()
	owners := slices.Clone(cfg.Assignment().Owner)
	for _, p := range req.Partitions {
		if p < 0 || p >= n {
			return ControlReply{}, badRequest("partition %d is out of range: the group has partitions 0-%d", p, n-1)
		}
		owners[p] = req.Member
	}
	var mms []partition.MemberMapping
	idx := map[string]int{}
	for p, o := range owners {
		if o == "" {
			return ControlReply{}, badRequest("partition %d has no owner; map every partition", p)
		}
		i, ok := idx[o]
		if !ok {
			i = len(mms)
			idx[o] = i
			mms = append(mms, partition.MemberMapping{Member: o})
		}
		mms[i].Partitions = append(mms[i].Partitions, p)
	}
	mc, err := s.client.SetMappings(ctx, req.Stream, req.Group, mms)
	if err != nil {
		return ControlReply{}, err
	}
	return ControlReply{Moves: movesOf(mc)}, nil
}

// mappingDelete turns a mapped elastic group back into a member list
// (Client.DeleteMappings, as `elastic delete-mapping`): Members, or Member,
// or when neither is given the members the mappings named.
func (s *Server) mappingDelete(ctx context.Context, req ControlRequest) (ControlReply, error) {
	if err := need(req, "stream", "group"); err != nil {
		return ControlReply{}, err
	}
	members := req.Members
	if len(members) == 0 && req.Member != "" {
		members = []string{req.Member}
	}
	mc, err := s.client.DeleteMappings(ctx, req.Stream, req.Group, members)
	if err != nil {
		return ControlReply{}, err
	}
	return ControlReply{Moves: movesOf(mc)}, nil
}

// stepDown unpins a member's instance (Client.StepDown, as `step-down`).
func (s *Server) stepDown(ctx context.Context, req ControlRequest) (ControlReply, error) {
	if err := need(req, "kind", "stream", "group", "member"); err != nil {
		return ControlReply{}, err
	}
	k, err := cg.ParseKind(req.Kind)
	if err != nil {
		return ControlReply{}, badRequest("kind %q: give static or elastic", req.Kind)
	}
	res, err := s.client.StepDown(ctx, k, req.Stream, req.Group, req.Member)
	if err != nil {
		return ControlReply{}, err
	}
	rep := ControlReply{PrevPinID: res.PrevPinID}
	if res.NothingPinned {
		rep.Note = cmpOr(res.Why, "no instance was pinned")
	}
	return rep, nil
}
