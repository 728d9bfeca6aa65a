package factory

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/jsm.go/natscontext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/pkg/cg"
)

// DefaultTimeout bounds connecting and each JetStream API request.
const DefaultTimeout = 5 * time.Second

// ClientName is how cg's connections appear in the server's monitoring.
const ClientName = "cg"

const startHint = "set --server/NATS_URL or --context, or start one with 'cg server'"

var errClosed = errors.New("connection closed before it was used")

// ConnOptions are the connection settings, named and resolved as the nats
// CLI does: a flag beats its environment variable, which beats the value
// in the selected NATS context, which beats the default.
type ConnOptions struct {
	Server   string // --server/-s, NATS_URL
	Context  string // --context, NATS_CONTEXT
	Creds    string // --creds, NATS_CREDS
	NKey     string // --nkey, NATS_NKEY
	User     string // --user, NATS_USER (alone: a token)
	Password string // --password, NATS_PASSWORD
	TLSCert  string // --tlscert, NATS_CERT
	TLSKey   string // --tlskey, NATS_KEY
	TLSCA    string // --tlsca, NATS_CA
	JSDomain string // --js-domain
	// Token and NoContext are the nats CLI's --token (NATS_TOKEN) and
	// --no-context, hidden: cg takes them so that `nats cg …`, which hands
	// its own connection flags to cg, loses none (docs/plugin.md).
	Token     string
	NoContext bool
	// Timeout is --timeout (or NATS_TIMEOUT): for connecting and for each
	// JetStream API request.
	Timeout time.Duration

	envTimeoutErr error
}

// AddConnFlags binds the connection flags to f.Conn. NATS_TIMEOUT, when
// valid, becomes the --timeout default; when invalid, Client reports it.
func (f *Factory) AddConnFlags(fs *pflag.FlagSet) {
	o := f.Conn
	if v := f.Env("NATS_TIMEOUT"); v != "" {
		d, err := ParseTimeout(v)
		if err != nil {
			o.envTimeoutErr = cmdutil.UsageErrorf("NATS_TIMEOUT=%q: %w", v, err)
		} else {
			o.Timeout = d
		}
	}
	fs.StringVarP(&o.Server, "server", "s", "", "NATS server URLs, comma separated (env NATS_URL; default nats://127.0.0.1:4222)")
	fs.StringVar(&o.Context, "context", "", "nats CLI context to connect with (env NATS_CONTEXT; default: the selected context)")
	fs.StringVar(&o.Creds, "creds", "", "user credentials file (env NATS_CREDS)")
	fs.StringVar(&o.NKey, "nkey", "", "user NKey seed file (env NATS_NKEY)")
	fs.StringVar(&o.User, "user", "", "user name, or a token when given without --password (env NATS_USER)")
	fs.StringVar(&o.Password, "password", "", "password (env NATS_PASSWORD)")
	fs.StringVar(&o.TLSCert, "tlscert", "", "TLS client certificate file (env NATS_CERT)")
	fs.StringVar(&o.TLSKey, "tlskey", "", "TLS client key file (env NATS_KEY)")
	fs.StringVar(&o.TLSCA, "tlsca", "", "TLS certificate authority file (env NATS_CA)")
	fs.StringVar(&o.JSDomain, "js-domain", "", "JetStream domain")
	fs.Var((*timeoutValue)(&o.Timeout), "timeout", "time to wait to connect and for each JetStream request (env NATS_TIMEOUT)")
	fs.StringVar(&o.Token, "token", "", "token (env NATS_TOKEN)")
	fs.BoolVar(&o.NoContext, "no-context", false, "ignore nats CLI contexts, the selected one too")
	_ = fs.MarkHidden("token")
	_ = fs.MarkHidden("no-context")
}

// ParseTimeout reads a positive duration with a unit ("5s", "500ms").
func ParseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return 0, fmt.Errorf("missing a unit, write it like %ss", s)
		}
		return 0, errors.New("not a duration, write it like 5s or 500ms")
	}
	if d <= 0 {
		return 0, errors.New("must be a positive duration, like 5s")
	}
	return d, nil
}

type timeoutValue time.Duration

func (v *timeoutValue) String() string { return time.Duration(*v).String() }
func (v *timeoutValue) Type() string   { return "duration" }
func (v *timeoutValue) Set(s string) error {
	d, err := ParseTimeout(s)
	if err != nil {
		return err
	}
	*v = timeoutValue(d)
	return nil
}

// target is a resolved place to connect to and how.
type target struct {
	url     string // as configured; may hold credentials, never print it raw
	source  string // where url came from, for error messages; "" when obvious
	domain  string
	opts    []nats.Option
	dialer  *recordingDialer
	secrets []string
	// files maps each file the settings name to its setting.
	files map[string]fileSetting
	// tls is set when TLS was asked for: a tls:// URL or a TLS file.
	tls      bool
	refusals *refusals
}

func (f *Factory) pick(flag, env string) string {
	if flag != "" {
		return flag
	}
	return f.Env(env)
}

// configRoot is where the nats CLI keeps its configuration, found through
// the injected environment so tests never read the real home directory.
func (f *Factory) configRoot() string {
	if x := f.Env("XDG_CONFIG_HOME"); x != "" {
		return x
	}
	if h := f.Env("HOME"); h != "" {
		return filepath.Join(h, ".config")
	}
	return ""
}

func (f *Factory) resolve() (*target, error) {
	o := f.Conn
	if o.envTimeoutErr != nil {
		return nil, o.envTimeoutErr
	}
	server := f.pick(o.Server, "NATS_URL")
	user := f.pick(o.User, "NATS_USER")
	password := f.pick(o.Password, "NATS_PASSWORD")
	cert, key := f.pick(o.TLSCert, "NATS_CERT"), f.pick(o.TLSKey, "NATS_KEY")
	if (cert == "") != (key == "") {
		return nil, cmdutil.UsageErrorf("--tlscert and --tlskey go together: give both or neither")
	}

	copts := []natscontext.Option{
		natscontext.WithServerURL(server),
		natscontext.WithCreds(f.pick(o.Creds, "NATS_CREDS")),
		natscontext.WithNKey(f.pick(o.NKey, "NATS_NKEY")),
		natscontext.WithCertificate(cert),
		natscontext.WithKey(key),
		natscontext.WithCA(f.pick(o.TLSCA, "NATS_CA")),
		natscontext.WithJSDomain(o.JSDomain),
		natscontext.WithToken(f.pick(o.Token, "NATS_TOKEN")),
	}
	// As the nats CLI: a user without a password is a token, and beats --token.
	if user != "" && password == "" {
		copts = append(copts, natscontext.WithToken(user))
	} else {
		copts = append(copts, natscontext.WithUser(user), natscontext.WithPassword(password))
	}

	var (
		nctx *natscontext.Context
		err  error
	)
	if o.NoContext {
		nctx, err = natscontext.New("", false, copts...)
	} else {
		nctx, err = f.loadContext(f.pick(o.Context, "NATS_CONTEXT"), copts)
	}
	if err != nil {
		return nil, err
	}

	t := &target{url: nctx.ServerURL(), domain: nctx.JSDomain()}
	switch {
	case o.Server != "":
	case f.Env("NATS_URL") != "":
		t.source = "NATS_URL"
	case nctx.Name != "":
		t.source = fmt.Sprintf("context %q", nctx.Name)
	}
	t.secrets = append(urlSecrets(t.url), password, nctx.Password(), nctx.Token())
	if err := f.checkCredentials(nctx); err != nil {
		return nil, t.scrub(err)
	}
	t.files = f.fileSettings(nctx)
	t.tls = strings.Contains(strings.ToLower(t.url), "tls://") ||
		nctx.Certificate() != "" || nctx.Key() != "" || nctx.CA() != ""
	t.refusals = &f.refusals

	extra := []nats.Option{
		nats.Name(ClientName),
		nats.Timeout(o.Timeout),
		// nats.go's default handler prints to os.Stderr behind the IO
		// streams' back. Errors that matter reach commands through the
		// API calls they make, except permission violations: the request
		// refused only times out, so they are kept to say why.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			f.refusals.record(err)
		}),
	}
	if nctx.SocksProxy() == "" {
		t.dialer = &recordingDialer{d: net.Dialer{Timeout: o.Timeout}}
		extra = append(extra, nats.SetCustomDialer(t.dialer))
	}
	t.opts, err = nctx.NATSOptions(extra...)
	if err != nil {
		return nil, t.scrub(fmt.Errorf("NATS connection settings: %w", err))
	}
	return t, nil
}

func (f *Factory) loadContext(name string, opts []natscontext.Option) (*natscontext.Context, error) {
	root := f.configRoot()
	if root == "" {
		if name != "" {
			return nil, fmt.Errorf("cannot load NATS context %q: neither XDG_CONFIG_HOME nor HOME is set", name)
		}
		return natscontext.New("", false, opts...)
	}
	reg := natscontext.NewRegistry(natscontext.NewFileBackendAt(root))
	nctx, err := reg.Load(context.Background(), name, opts...)
	switch {
	case err == nil:
		return nctx, nil
	case name != "" && errors.Is(err, natscontext.ErrNotFound):
		return nil, fmt.Errorf("unknown NATS context %q: no %s; list them with 'nats context ls'",
			name, filepath.Join(root, "nats", "context", name+".json"))
	case name != "":
		return nil, fmt.Errorf("cannot load NATS context %q: %w", name, err)
	default:
		return nil, fmt.Errorf("cannot load the selected NATS context (%s): %w",
			filepath.Join(root, "nats", "context.txt"), err)
	}
}

func (f *Factory) connect() (*cg.Client, *nats.Conn, error) {
	t, err := f.resolve()
	if err != nil {
		return nil, nil, err
	}
	nc, err := nats.Connect(t.url, t.opts...)
	if err != nil {
		return nil, nil, t.scrub(t.connectError(err, f.Conn.Timeout))
	}
	js, err := newJetStream(nc, t.domain, f.Conn.Timeout)
	if err == nil {
		err = t.checkJetStream(js, f.Conn.Timeout)
	}
	if err != nil {
		nc.Close()
		return nil, nil, t.scrub(err)
	}
	return cg.New(js), nc, nil
}

func newJetStream(nc *nats.Conn, domain string, timeout time.Duration) (jetstream.JetStream, error) {
	opt := jetstream.WithDefaultTimeout(timeout)
	if domain != "" {
		return jetstream.NewWithDomain(nc, domain, opt)
	}
	return jetstream.New(nc, opt)
}

func (t *target) where() string {
	s := "NATS at " + RedactURL(t.url)
	if t.source != "" {
		s += " (from " + t.source + ")"
	}
	return s
}

func (t *target) connectError(err error, timeout time.Duration) error {
	if isAuthError(err) {
		return fmt.Errorf("cannot connect to %s: %s; check --user/--password, --creds, --nkey or the context's credentials",
			t.where(), strings.ToLower(strings.TrimPrefix(err.Error(), "nats: ")))
	}
	cause := err
	if errors.Is(err, nats.ErrNoServers) && t.dialer != nil {
		if last := t.dialer.lastError(); last != nil {
			cause = last
		}
	}
	hint := startHint
	var (
		uerr *url.Error
		perr *fs.PathError
	)
	switch {
	case errors.As(cause, &uerr):
		return fmt.Errorf("cannot connect to %s: invalid URL: %v; fix --server, NATS_URL or the context's url", t.where(), uerr.Err)
	case errors.As(cause, &perr):
		// A file the settings name (read as nats.go connects): never a
		// missing server.
		s, ok := t.files[perr.Path]
		if !ok {
			s = fileSetting{name: "file", hint: "check --creds, --nkey, --tlsca, --tlscert, --tlskey and the context's files"}
		}
		return fmt.Errorf("cannot connect to %s: %s %s: cannot read it: %v; %s", t.where(), s.name, perr.Path, perr.Err, s.hint)
	case isCredentialError(cause):
		hint = credsHint
	case t.tlsDropped(cause):
		// With mutual TLS the handshake completes on the client's side
		// and the server then drops a client without a certificate it
		// trusts: what the client sees first is a broken pipe, a reset
		// or an end of file more often than the server's alert.
		return fmt.Errorf("cannot connect to %s: %s as the TLS connection began: the server may require a valid client certificate; "+
			"check --tlsca, --tlscert and --tlskey", t.where(), describe(cause, timeout))
	case isTLSError(cause):
		hint = tlsHint
	}
	return fmt.Errorf("cannot connect to %s: %s; %s", t.where(), describe(cause, timeout), hint)
}

// tlsDropped reports whether err is the server dropping a TLS connection
// right after it was made.
func (t *target) tlsDropped(err error) bool {
	usedTLS := t.tls || (t.dialer != nil && t.dialer.sawTLS())
	return usedTLS && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, nats.ErrConnectionClosed))
}

func (t *target) checkJetStream(js jetstream.JetStream, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// A refused request is never answered: stop waiting at the refusal.
	go func() {
		select {
		case <-t.refusals.refused():
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := js.AccountInfo(ctx)
	if err != nil {
		if r := t.refusals.lastRefusal(); r != "" {
			api := "$JS.API.>"
			if t.domain != "" {
				api = "$JS." + t.domain + ".API.>"
			}
			return fmt.Errorf("this user may not use JetStream on %s: the server refused: %s; ask for permission to publish to %s and to subscribe to _INBOX.>",
				t.where(), r, api)
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled) && t.domain != "":
		return fmt.Errorf("no JetStream answers for domain %q on %s; check --js-domain", t.domain, t.where())
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return fmt.Errorf("JetStream is not enabled on %s; run nats-server with -js, or start one with 'cg server'", t.where())
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("JetStream is not enabled for this account on %s; ask the server's operator to enable it", t.where())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("JetStream on %s did not answer within %s; check that it is healthy and that this user may use $JS.API (or raise --timeout)", t.where(), timeout)
	default:
		// Anything else (a permission, an odd API error) is left for the
		// command's own requests to report in context.
		return nil
	}
}

// scrub removes any credential that could have leaked into err's text
// (url.Parse, for one, quotes the whole URL).
func (t *target) scrub(err error) error {
	msg := err.Error()
	for _, part := range strings.Split(t.url, ",") {
		if part = strings.TrimSpace(part); part != "" {
			msg = strings.ReplaceAll(msg, part, RedactURL(part))
		}
	}
	for _, s := range t.secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	// Whatever a setting held by mistake, no seed or JWT is ever shown.
	msg = seedText.ReplaceAllString(msg, "xxxxx")
	msg = jwtText.ReplaceAllString(msg, "xxxxx")
	if msg == err.Error() {
		return err
	}
	if cmdutil.IsUsage(err) {
		return cmdutil.UsageErrorf("%s", msg)
	}
	return errors.New(msg)
}

// RedactURL hides the credentials of a server URL, or of each URL in a
// comma-separated list: user:password@ becomes user:xxxxx@ and token@
// becomes xxxxx@.
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		parts[i] = redactOne(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func redactOne(s string) string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 && i < at {
		start = i + 3
	}
	userinfo := s[start:at]
	if user, _, ok := strings.Cut(userinfo, ":"); ok {
		return s[:start] + user + ":xxxxx" + s[at:]
	}
	return s[:start] + "xxxxx" + s[at:]
}

func urlSecrets(urls string) []string {
	var out []string
	for _, p := range strings.Split(urls, ",") {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "://") {
			p = "nats://" + p
		}
		u, err := url.Parse(p)
		if err != nil || u.User == nil {
			// Unparseable: fall back on the raw userinfo.
			if at := strings.LastIndex(p, "@"); at > 0 {
				_, info, _ := strings.Cut(p[:at], "://")
				_, pw, _ := strings.Cut(info, ":")
				out = append(out, info, pw)
			}
			continue
		}
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		} else {
			out = append(out, u.User.Username())
		}
	}
	return out
}

func isAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) ||
		errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) ||
		errors.Is(err, nats.ErrAccountAuthExpired)
}

func isTLSError(err error) bool {
	var (
		verr *tls.CertificateVerificationError
		rerr tls.RecordHeaderError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
	)
	msg := err.Error()
	return errors.As(err, &verr) || errors.As(err, &rerr) || errors.As(err, &uerr) || errors.As(err, &herr) || errors.As(err, &cerr) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) || errors.Is(err, nats.ErrTLS) ||
		// nats.go's own wording of a CA or client certificate file it
		// cannot use ("failed to parse root certificate from ...").
		strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:") ||
		strings.Contains(msg, "certificate") || strings.Contains(msg, "rootCA")
}

// isCredentialError reports whether err is about the credentials cg was
// given (read as nats.go connects), rather than about reaching a server.
func isCredentialError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "nkeys:") || strings.Contains(msg, "key pair") ||
		strings.Contains(msg, "signing nonce") || strings.Contains(msg, "user jwt")
}

// describe words a dial failure briefly: "connection refused", "no such
// host foo", "timed out after 5s".
func describe(err error, timeout time.Duration) string {
	var (
		dnsErr *net.DNSError
		errno  syscall.Errno
		nerr   net.Error
	)
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return "no such host " + dnsErr.Name
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &nerr) && nerr.Timeout(), errors.Is(err, nats.ErrTimeout):
		return fmt.Sprintf("timed out after %s", timeout)
	}
	return strings.TrimPrefix(err.Error(), "nats: ")
}

// recordingDialer remembers the last dial error, which nats.go otherwise
// folds into "no servers available for connection", and whether a
// connection started a TLS handshake (the server may require TLS when
// nothing in the settings asked for it).
type recordingDialer struct {
	d    net.Dialer
	mu   sync.Mutex
	last error
	tls  bool
}

func (r *recordingDialer) Dial(network, address string) (net.Conn, error) {
	c, err := r.d.Dial(network, address)
	if err != nil {
		r.mu.Lock()
		r.last = err
		r.mu.Unlock()
		return nil, err
	}
	return &watchedConn{Conn: c, d: r}, nil
}

func (r *recordingDialer) sawTLS() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tls
}

// watchedConn notes whether the client's first write is a TLS handshake
// record (a ClientHello) rather than a NATS protocol line.
type watchedConn struct {
	net.Conn
	d     *recordingDialer
	first sync.Once
}

func (c *watchedConn) Write(p []byte) (int, error) {
	if len(p) > 0 {
		c.first.Do(func() {
			if p[0] == 0x16 { // TLS record type: handshake
				c.d.mu.Lock()
				c.d.tls = true
				c.d.mu.Unlock()
			}
		})
	}
	return c.Conn.Write(p)
}

func (r *recordingDialer) lastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}
