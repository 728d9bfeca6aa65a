package factory

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/jsm.go/natscontext"
	"github.com/nats-io/nats.go"
)

// Hints for settings that name files.
const (
	credsHint = "check --creds, --nkey or the context's credentials"
	tlsHint   = "check --tlsca, --tlscert and --tlskey, or the server's TLS settings"
)

// fileSetting is a connection setting that names a file, and how to name
// the setting in messages: its flag, its environment variable or the
// context it came from.
type fileSetting struct {
	name string // "--creds", "NATS_CREDS" or `context "dev" creds`
	hint string
}

// settingName says where a setting's value came from, as resolve picked
// it: the flag, else its environment variable, else the context.
func (f *Factory) settingName(flagValue, flag, env, field string, nctx *natscontext.Context) string {
	switch {
	case flagValue != "":
		return flag
	case f.Env(env) != "":
		return env
	case nctx.Name != "":
		return fmt.Sprintf("context %q %s", nctx.Name, field)
	}
	return flag
}

// fileSettings maps the path of each file the connection settings name to
// the setting, so an error about a file can say which setting to fix.
func (f *Factory) fileSettings(nctx *natscontext.Context) map[string]fileSetting {
	o := f.Conn
	out := map[string]fileSetting{}
	for _, s := range []struct {
		value, flagValue, flag, env, field, hint string
	}{
		{nctx.Creds(), o.Creds, "--creds", "NATS_CREDS", "creds", credsHint},
		{nctx.NKey(), o.NKey, "--nkey", "NATS_NKEY", "nkey", credsHint},
		{nctx.Certificate(), o.TLSCert, "--tlscert", "NATS_CERT", "cert", tlsHint},
		{nctx.Key(), o.TLSKey, "--tlskey", "NATS_KEY", "key", tlsHint},
		{nctx.CA(), o.TLSCA, "--tlsca", "NATS_CA", "ca", tlsHint},
	} {
		if s.value == "" {
			continue
		}
		if path, ok := fileRef(s.value); ok {
			out[path] = fileSetting{name: f.settingName(s.flagValue, s.flag, s.env, s.field, nctx), hint: s.hint}
		}
	}
	return out
}

// checkCredentials refuses a seed or a creds file's content given where
// its file's path belongs, without echoing it, and reads the credentials
// file the connection will use, so a missing or damaged one is named
// before any server is dialled. It follows natscontext's precedence: a
// user name beats a creds file, which beats an nkey.
func (f *Factory) checkCredentials(nctx *natscontext.Context) error {
	o := f.Conn
	creds, nkey := nctx.Creds(), nctx.NKey()
	if creds != "" && looksLikeCredsContent(creds) {
		return fmt.Errorf("%s needs the path of a .creds file, not its content",
			f.settingName(o.Creds, "--creds", "NATS_CREDS", "creds", nctx))
	}
	if nkey != "" && looksLikeSeed(nkey) {
		return fmt.Errorf("%s needs the path of a file holding the seed, not the seed itself",
			f.settingName(o.NKey, "--nkey", "NATS_NKEY", "nkey", nctx))
	}
	if nctx.User() != "" {
		return nil
	}
	switch {
	case creds != "":
		if path, ok := fileRef(creds); ok {
			return checkCredsFile(f.settingName(o.Creds, "--creds", "NATS_CREDS", "creds", nctx), path)
		}
	case nkey != "":
		if path, ok := fileRef(nkey); ok {
			if _, err := nats.NkeyOptionFromSeed(path); err != nil {
				return fileError(f.settingName(o.NKey, "--nkey", "NATS_NKEY", "nkey", nctx), path, "seed", err)
			}
		}
	}
	return nil
}

// checkCredsFile reads a .creds file as nats.go will when it connects.
func checkCredsFile(name, path string) error {
	var opts nats.Options
	if err := nats.UserCredentials(path)(&opts); err != nil {
		return fileError(name, path, "credentials", err)
	}
	jwt, err := opts.UserJWT()
	if err != nil {
		return fileError(name, path, "credentials", err)
	}
	if strings.Count(jwt, ".") != 2 {
		return fmt.Errorf("%s %s is not a valid credentials file: it holds no user JWT", name, path)
	}
	if _, err := opts.SignatureCB([]byte("cg")); err != nil {
		return fileError(name, path, "credentials", err)
	}
	return nil
}

// fileError words a credentials file that cannot be used: unreadable, or
// not holding what it should.
func fileError(name, path, kind string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %s: cannot read the %s file: %v", name, path, kind, pe.Err)
	}
	return fmt.Errorf("%s %s is not a valid %s file (%s)", name, path, kind,
		strings.TrimPrefix(innermost(err).Error(), "nats: "))
}

func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// fileRef is the file a credentials or TLS setting names, resolved as
// natscontext does; ok is false for other schemes (op://, env://, ...),
// which natscontext resolves itself.
func fileRef(ref string) (path string, ok bool) {
	if u, err := url.Parse(ref); err == nil && len(u.Scheme) >= 2 && !strings.EqualFold(u.Scheme, "file") {
		return "", false
	}
	if len(ref) >= len("file://") && strings.EqualFold(ref[:len("file://")], "file://") {
		ref = ref[len("file://"):]
	}
	ref = os.ExpandEnv(ref)
	if strings.HasPrefix(ref, "~") {
		if u, err := user.Current(); err == nil {
			ref = strings.Replace(ref, "~", u.HomeDir, 1)
		}
	}
	return ref, true
}

var (
	// An nkey seed: 'S', the key type, then base32 (58 characters in all;
	// a damaged or truncated one is still mostly secret).
	seedValue = regexp.MustCompile(`^S[A-Z][A-Z2-7]{38,}$`)
	// What scrub hides in any message: seeds and JWTs.
	seedText = regexp.MustCompile(`S[A-Z][A-Z2-7]{56}`)
	jwtText  = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)
)

// looksLikeSeed reports whether an --nkey value is a seed (or a seed
// file's content) rather than the path of a file.
func looksLikeSeed(v string) bool {
	if exists(v) {
		return false
	}
	return strings.ContainsAny(v, "\r\n") || strings.Contains(v, "-----BEGIN") ||
		seedValue.MatchString(strings.TrimSpace(v))
}

// looksLikeCredsContent reports whether a --creds value is a creds file's
// content (or a JWT or seed) rather than the path of a file.
func looksLikeCredsContent(v string) bool {
	if exists(v) {
		return false
	}
	t := strings.TrimSpace(v)
	return strings.ContainsAny(v, "\r\n") || strings.Contains(v, "-----BEGIN") ||
		strings.HasPrefix(t, "eyJ") || seedValue.MatchString(t)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// refusals keeps the last permission violation the server reported on the
// connection. nats.go delivers them asynchronously; the request that
// caused one only times out, so without them a refusal reads as a hang.
type refusals struct {
	mu   sync.Mutex
	last string
	seen chan struct{} // closed at the first violation
}

func (r *refusals) init() {
	if r.seen == nil {
		r.seen = make(chan struct{})
	}
}

// record keeps err if it is a permission violation.
func (r *refusals) record(err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	msg := strings.TrimPrefix(err.Error(), nats.ErrPermissionViolation.Error()+": ")
	msg = strings.Join(strings.Fields(msg), " ") // it joins an error line
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	select {
	case <-r.seen:
	default:
		close(r.seen)
	}
	r.last = msg
}

// lastRefusal is the server's wording of the last violation, or "".
func (r *refusals) lastRefusal() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// refused is closed once a violation has been recorded.
func (r *refusals) refused() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	return r.seen
}
