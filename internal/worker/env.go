package worker

import (
	"os"
	"strconv"
	"strings"
)

// Meta is what a worker is told about a message besides its body.
type Meta struct {
	Stream    string // the stream the group is on (as named to consume)
	Group     string
	Member    string
	Subject   string // partition token stripped
	Partition int
	// Seq and Delivered are the stream sequence and delivery count the
	// member consumer reports: for an elastic group, the sequence in the
	// group's work stream.
	Seq       uint64
	Delivered uint64
	// Key is the partitioning key (the hashed tokens joined with "."), when
	// it can be read off the subject (HasKey).
	Key     string
	HasKey  bool
	Headers map[string][]string
}

// The variables a command started per message gets (Exec), besides the
// headers (HeaderEnvName).
const (
	EnvStream    = "CG_STREAM"
	EnvGroup     = "CG_GROUP"
	EnvMember    = "CG_MEMBER"
	EnvSubject   = "CG_SUBJECT"
	EnvPartition = "CG_PARTITION"
	EnvStreamSeq = "CG_STREAM_SEQ"
	EnvDelivered = "CG_DELIVERED"
	EnvKey       = "CG_KEY"
	// Batch commands (ExecBatch) get these instead of the per-message ones.
	EnvBatch      = "CG_BATCH"
	EnvBatchSize  = "CG_BATCH_SIZE"
	EnvAttempt    = "CG_ATTEMPT"
	envHdrPrefix  = "CG_HDR_"
	envHdrIndexed = "__"
)

// ownEnv names the variables cg sets: inherited ones of the same names are
// dropped, so a cg started under another never passes its message on.
func ownEnv(name string) bool {
	switch name {
	case EnvStream, EnvGroup, EnvMember, EnvSubject, EnvPartition, EnvStreamSeq, EnvDelivered, EnvKey, EnvBatch, EnvBatchSize, EnvAttempt:
		return true
	}
	return strings.HasPrefix(name, envHdrPrefix)
}

// baseEnv is cg's own environment without the variables cg sets.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !ownEnv(name) {
			out = append(out, kv)
		}
	}
	return out
}

// MessageEnv is the environment of a command started for one message:
// cg's own environment, then the metadata and the headers.
func MessageEnv(m Meta) []string {
	env := baseEnv()
	env = append(env,
		EnvStream+"="+m.Stream, EnvGroup+"="+m.Group, EnvMember+"="+m.Member, EnvSubject+"="+m.Subject,
		EnvPartition+"="+strconv.Itoa(m.Partition), EnvStreamSeq+"="+strconv.FormatUint(m.Seq, 10),
		EnvDelivered+"="+strconv.FormatUint(m.Delivered, 10))
	if m.HasKey {
		env = append(env, EnvKey+"="+m.Key)
	}
	return append(env, HeaderEnv(m.Headers)...)
}

// HeaderEnv maps message headers onto variables: the first value of header
// H is CG_HDR_<HeaderEnvName(H)>, its i-th value (i >= 2) is
// CG_HDR_<HeaderEnvName(H)>__<i>.
func HeaderEnv(h map[string][]string) []string {
	var env []string
	for name, vals := range h {
		v := envHdrPrefix + EncodeHeaderName(name)
		for i, val := range vals {
			if i == 0 {
				env = append(env, v+"="+val)
				continue
			}
			env = append(env, v+envHdrIndexed+strconv.Itoa(i+1)+"="+val)
		}
	}
	return env
}

// EncodeHeaderName writes a header name with [A-Za-z0-9] as they are and
// every other byte, "_" included, as _XX (two upper-case hex digits): a
// valid variable name fragment, case kept, and decodable without doubt
// (DecodeHeaderName), since "_" is only ever followed by two hex digits.
// Cg-Key becomes Cg_2DKey.
func EncodeHeaderName(name string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// DecodeHeaderName undoes EncodeHeaderName; ok is false for a string it
// never writes.
func DecodeHeaderName(enc string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '_' && i+2 < len(enc) && upperHex(enc[i+1]) >= 0 && upperHex(enc[i+2]) >= 0:
			b.WriteByte(byte(upperHex(enc[i+1])<<4 | upperHex(enc[i+2])))
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

func upperHex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// HeadersFromEnv reads the headers back from an environment written by
// HeaderEnv (what a worker in Go would do); other variables are ignored.
func HeadersFromEnv(env []string) map[string][]string {
	type val struct {
		i int
		v string
	}
	got := map[string][]val{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		enc, ok := strings.CutPrefix(k, envHdrPrefix)
		if !ok {
			continue
		}
		i := 1
		if e, idx, indexed := strings.Cut(enc, envHdrIndexed); indexed {
			n, err := strconv.Atoi(idx)
			if err != nil || n < 2 {
				continue
			}
			enc, i = e, n
		}
		name, ok := DecodeHeaderName(enc)
		if !ok {
			continue
		}
		got[name] = append(got[name], val{i, v})
	}
	out := map[string][]string{}
	for name, vs := range got {
		vals := make([]string, len(vs))
		for _, x := range vs {
			if x.i > len(vs) {
				return nil
			}
			vals[x.i-1] = x.v
		}
		out[name] = vals
	}
	return out
}
