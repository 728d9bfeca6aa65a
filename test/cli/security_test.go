// The security tests run cg against real in-process servers that demand
// credentials (user/password, nkeys, JWT creds, TLS and mutual TLS) or
// limit what a user may do, and checks that cg connects with each, fails
// promptly with a clear one-line error without them, and never prints a
// secret: no password, seed, JWT or private key in any output, on success
// or failure, in text or JSON.
package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// promptly bounds every failing run: a refusal must never wait long.
const promptly = 15 * time.Second

// secrets collects what must never be printed and checks outputs for it,
// whole and in pieces (a secret cut short or wrapped still leaks).
type secrets struct{ pieces []string }

func (s *secrets) add(vals ...string) {
	for _, v := range vals {
		for _, line := range strings.Split(v, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case len(line) < 6:
			case len(line) < 24:
				s.pieces = append(s.pieces, line)
			default:
				for i := 0; i+16 <= len(line); i += 4 {
					s.pieces = append(s.pieces, line[i:i+16])
				}
			}
		}
	}
}

func (s *secrets) check(t *testing.T, what string, r result) {
	t.Helper()
	for _, p := range s.pieces {
		if strings.Contains(r.Out, p) || strings.Contains(r.Err, p) {
			t.Errorf("%s: a secret (%q...) leaked into the output\n%s", what, p[:min(6, len(p))], r)
			return
		}
	}
}

// harness runs invocations with a base environment: ok wants success,
// fail wants a prompt failure with the given exit code and one error line
// matching want; both check that no secret leaked.
type harness struct {
	t       *testing.T
	env     []string
	secrets *secrets
}

func (h *harness) ok(what string, env []string, args ...string) result {
	h.t.Helper()
	r := run(h.t, append(append([]string{}, h.env...), env...), args...)
	h.secrets.check(h.t, what, r)
	if r.Code != 0 {
		h.t.Fatalf("%s: want success\n%s", what, r)
	}
	return r
}

func (h *harness) fail(what string, code int, want *regexp.Regexp, env []string, args ...string) result {
	h.t.Helper()
	r := run(h.t, append(append([]string{}, h.env...), env...), args...)
	h.secrets.check(h.t, what, r)
	if r.Code != code {
		h.t.Errorf("%s: exit %d, want %d\n%s", what, r.Code, code, r)
	}
	if r.Took > promptly {
		h.t.Errorf("%s: took %s to fail\n%s", what, r.Took, r)
	}
	if r.Out != "" {
		h.t.Errorf("%s: a failure printed on stdout\n%s", what, r)
	}
	lines := strings.Split(strings.TrimSuffix(r.Err, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "error: ") || len(lines) > 2 || (len(lines) == 2) != (code == 2) {
		h.t.Errorf("%s: want one error line (and the usage hint only for usage errors)\n%s", what, r)
	}
	if !want.MatchString(lines[0]) {
		h.t.Errorf("%s: error does not match %q\n%s", what, want, r)
	}
	return r
}

var (
	authViolation = regexp.MustCompile(`cannot connect to NATS at .*: authorization violation; check --user/--password, --creds, --nkey`)
	// A credential problem must not be worded as a missing server.
	noServerHint = "start one with 'cg server'"
	tlsFlags     = regexp.MustCompile(`; check --tlsca, --tlscert and --tlskey`)
)

// stampedStream creates ORDERS, partition-stamped into 10, and returns a
// JetStream handle on nc.
func stampedStream(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// groupInfo decodes `info --json` far enough to check it.
func groupInfo(t *testing.T, r result) (group string, members int) {
	t.Helper()
	var gi struct {
		Group   string `json:"group"`
		Members []any  `json:"members"`
	}
	if err := json.Unmarshal([]byte(r.Out), &gi); err != nil {
		t.Fatalf("info --json: %v\n%s", err, r)
	}
	return gi.Group, len(gi.Members)
}

func TestUserPassword(t *testing.T) {
	t.Parallel()
	const user, password, wrong = "alice", "Pa55:w@rd/Us3r-s3cret", "Pa55:w@rd/Us3r-s3creT"
	o := natstest.Options(t.TempDir())
	o.Users = []*server.User{{Username: user, Password: password}}
	s := natstest.Start(t, o)
	stampedStream(t, connect(t, s.ClientURL(), nats.UserInfo(user, password)))

	withCreds := func(pw string) string {
		return "nats://" + url.UserPassword(user, pw).String() + "@" + s.Addr().String()
	}
	sec := &secrets{}
	sec.add(password, wrong, strings.TrimPrefix(url.UserPassword(user, password).String(), user+":"),
		strings.TrimPrefix(url.UserPassword(user, wrong).String(), user+":"))
	h := &harness{t: t, env: []string{"NATS_URL=" + s.ClientURL()}, secrets: sec}

	// Flags, environment, and a URL carrying the credentials.
	r := h.ok("flags", nil, "static", "create", "balanced", "ORDERS", "g", "10", "m1", "m2", "--user", user, "--password", password)
	if !strings.Contains(r.Out, "m1=0-4  m2=5-9") {
		t.Fatalf("create: %s", r)
	}
	r = h.ok("env --json", []string{"NATS_USER=" + user, "NATS_PASSWORD=" + password}, "static", "info", "ORDERS", "g", "--json")
	if g, n := groupInfo(t, r); g != "g" || n != 2 {
		t.Fatalf("info --json: group %q with %d members\n%s", g, n, r)
	}
	r = h.ok("URL flag", nil, "static", "ls", "ORDERS", "--server", withCreds(password))
	if !strings.Contains(r.Out, "m1 m2") {
		t.Fatalf("ls: %s", r)
	}
	r = h.ok("URL env --json", []string{"NATS_URL=" + withCreds(password)}, "static", "ls", "ORDERS", "--json")
	if !strings.Contains(r.Out, `"group": "g"`) {
		t.Fatalf("ls --json: %s", r)
	}

	// Wrong, partial or no credentials: refused at once, worded as such.
	h.fail("wrong password", 1, authViolation, nil, "static", "info", "ORDERS", "g", "--user", user, "--password", wrong)
	h.fail("wrong password --json", 1, authViolation, nil, "static", "info", "ORDERS", "g", "--user", user, "--password", wrong, "--json")
	h.fail("wrong password in env", 1, authViolation, []string{"NATS_USER=" + user, "NATS_PASSWORD=" + wrong}, "static", "ls", "ORDERS")
	r = h.fail("wrong password in URL", 1, authViolation, nil, "static", "create", "balanced", "ORDERS", "g2", "10", "m1", "--server", withCreds(wrong))
	if !strings.Contains(r.Err, "nats://alice:xxxxx@"+s.Addr().String()) {
		t.Errorf("the URL is not shown redacted\n%s", r)
	}
	h.fail("user without password", 1, authViolation, nil, "static", "ls", "ORDERS", "--user", user)
	h.fail("no credentials", 1, authViolation, nil, "static", "ls", "ORDERS")
	down := closedAddr(t)
	r = h.fail("credentials for a server that is down", 1, regexp.MustCompile(`cannot connect to NATS at nats://alice:xxxxx@`+down+`: connection refused`),
		nil, "static", "ls", "ORDERS", "--server", "nats://"+url.UserPassword(user, password).String()+"@"+down)

	js, err := jetstream.New(connect(t, s.ClientURL(), nats.UserInfo(user, password)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cg.New(js).StaticConfig(context.Background(), "ORDERS", "g2"); err == nil {
		t.Fatal("a refused create stored group g2")
	}
}

func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestNKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ukp, _ := nkeys.CreateUser()
	seed, _ := ukp.Seed()
	pub, _ := ukp.PublicKey()
	okp, _ := nkeys.CreateUser()
	otherSeed, _ := okp.Seed()
	// A seed damaged by one character: unusable, still mostly secret.
	damaged := []byte(string(seed))
	if damaged[20] == 'A' {
		damaged[20] = 'B'
	} else {
		damaged[20] = 'A'
	}
	seedFile := writeFile(t, dir, "user.nk", seed)
	otherFile := writeFile(t, dir, "other.nk", otherSeed)
	damagedFile := writeFile(t, dir, "damaged.nk", damaged)

	o := natstest.Options(t.TempDir())
	o.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	s := natstest.Start(t, o)
	stampedStream(t, connect(t, s.ClientURL(), nats.Nkey(pub, ukp.Sign)))

	sec := &secrets{}
	sec.add(string(seed), string(otherSeed), string(damaged))
	h := &harness{t: t, env: []string{"NATS_URL=" + s.ClientURL()}, secrets: sec}

	h.ok("--nkey", nil, "static", "create", "balanced", "ORDERS", "g", "10", "m1", "--nkey", seedFile)
	r := h.ok("NATS_NKEY --json", []string{"NATS_NKEY=" + seedFile}, "static", "info", "ORDERS", "g", "--json")
	if g, n := groupInfo(t, r); g != "g" || n != 1 {
		t.Fatalf("info --json: group %q with %d members\n%s", g, n, r)
	}

	h.fail("another user's seed", 1, authViolation, nil, "static", "ls", "ORDERS", "--nkey", otherFile)
	h.fail("no nkey", 1, authViolation, nil, "static", "ls", "ORDERS", "--json")
	h.fail("missing seed file", 1, regexp.MustCompile(regexp.QuoteMeta(filepath.Join(dir, "missing.nk"))), nil, "static", "ls", "ORDERS", "--nkey", filepath.Join(dir, "missing.nk"))
	// A damaged file is named, so the user knows which setting is wrong.
	r = h.fail("damaged seed file", 1, regexp.MustCompile(regexp.QuoteMeta(damagedFile)), nil, "static", "ls", "ORDERS", "--nkey", damagedFile)
	if strings.Contains(r.Err, noServerHint) {
		t.Errorf("a bad seed file is worded as a missing server\n%s", r)
	}
	// The seed itself where its file's path belongs: refused without
	// echoing it.
	h.fail("seed instead of a file", 1, regexp.MustCompile(`(?i)nkey`), nil, "static", "ls", "ORDERS", "--nkey", string(seed))
	h.fail("seed instead of a file in env", 1, regexp.MustCompile(`(?i)nkey`), []string{"NATS_NKEY=" + string(seed)}, "static", "ls", "ORDERS", "--json")
}

// operator is an operator-mode trust chain made in the test: an operator,
// a system account and an account with JetStream, all in a memory resolver.
type operator struct {
	claims   *jwt.OperatorClaims
	kp       nkeys.KeyPair
	resolver *server.MemAccResolver
	sysPub   string
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	kp, _ := nkeys.CreateOperator()
	pub, _ := kp.PublicKey()
	token, err := jwt.NewOperatorClaims(pub).Encode(kp)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := jwt.DecodeOperatorClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	op := &operator{claims: claims, kp: kp, resolver: &server.MemAccResolver{}}
	_, op.sysPub = op.account(t, false)
	return op
}

// account makes an account signed by the operator, with unlimited
// JetStream when js, and stores it in the resolver.
func (op *operator) account(t *testing.T, js bool) (nkeys.KeyPair, string) {
	t.Helper()
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	if js {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	}
	token, err := ac.Encode(op.kp)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.resolver.Store(pub, token); err != nil {
		t.Fatal(err)
	}
	return kp, pub
}

// user makes a user of the account signed by akp: its JWT, seed and the
// .creds file holding both.
func user(t *testing.T, akp nkeys.KeyPair) (token string, seed, creds []byte) {
	t.Helper()
	ukp, _ := nkeys.CreateUser()
	pub, _ := ukp.PublicKey()
	seed, _ = ukp.Seed()
	token, err := jwt.NewUserClaims(pub).Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	creds, err = jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	return token, seed, creds
}

func TestCreds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	op := newOperator(t)
	akp, _ := op.account(t, true)
	token, seed, creds := user(t, akp)
	credsFile := writeFile(t, dir, "user.creds", creds)
	// A user of an account this server has never heard of.
	strangerKp, _ := nkeys.CreateAccount()
	sToken, sSeed, sCreds := user(t, strangerKp)
	strangerFile := writeFile(t, dir, "stranger.creds", sCreds)
	garbageFile := writeFile(t, dir, "garbage.creds", []byte("-----BEGIN NATS USER JWT-----\nnot a jwt\n------END NATS USER JWT------\n"))
	aSeed, _ := akp.Seed()

	o := natstest.Options(t.TempDir())
	o.TrustedOperators = []*jwt.OperatorClaims{op.claims}
	o.AccountResolver = op.resolver
	o.SystemAccount = op.sysPub
	s := natstest.Start(t, o)
	js := stampedStream(t, connect(t, s.ClientURL(), nats.UserCredentials(credsFile)))

	sec := &secrets{}
	sec.add(token, string(seed), sToken, string(sSeed), string(aSeed))
	h := &harness{t: t, env: []string{"NATS_URL=" + s.ClientURL()}, secrets: sec}

	// End to end: create, consume, inspect.
	h.ok("create", nil, "static", "create", "balanced", "ORDERS", "g", "10", "m1", "--creds", credsFile)
	for i := 0; i < 20; i++ {
		if _, err := js.Publish(context.Background(), fmt.Sprintf("orders.k%d", i%7), nil); err != nil {
			t.Fatal(err)
		}
	}
	r := h.ok("consume", nil, "static", "consume", "ORDERS", "g", "m1", "--count", "20", "--sleep", "0s", "--json", "--creds", credsFile)
	msgs := strings.Count(r.Out, `"type":"msg"`)
	if msgs != 20 || !strings.Contains(r.Out, `"reason":"count reached"`) {
		t.Fatalf("consume handled %d messages, want 20\n%s", msgs, r)
	}
	r = h.ok("NATS_CREDS info --json", []string{"NATS_CREDS=" + credsFile}, "static", "info", "ORDERS", "g", "--json")
	if g, n := groupInfo(t, r); g != "g" || n != 1 {
		t.Fatalf("info --json: group %q with %d members\n%s", g, n, r)
	}

	h.fail("no creds", 1, authViolation, nil, "static", "ls", "ORDERS")
	h.fail("creds of an unknown account", 1, authViolation, nil, "static", "ls", "ORDERS", "--json", "--creds", strangerFile)
	// A creds file that is missing or unreadable is named, and not worded
	// as a missing server.
	missing := filepath.Join(dir, "missing.creds")
	r = h.fail("missing creds file", 1, regexp.MustCompile(regexp.QuoteMeta(missing)), nil, "static", "ls", "ORDERS", "--creds", missing)
	if strings.Contains(r.Err, noServerHint) {
		t.Errorf("a missing creds file is worded as a missing server\n%s", r)
	}
	r = h.fail("garbage creds file", 1, regexp.MustCompile(regexp.QuoteMeta(garbageFile)), nil, "static", "ls", "ORDERS", "--creds", garbageFile)
	if strings.Contains(r.Err, noServerHint) {
		t.Errorf("a garbage creds file is worded as a missing server\n%s", r)
	}
	// The file's content where its path belongs: refused, echoing none of it.
	h.fail("creds content instead of a file", 1, regexp.MustCompile(`(?i)creds`), nil, "static", "ls", "ORDERS", "--creds", string(creds))
	h.fail("creds content instead of a file in env --json", 1, regexp.MustCompile(`(?i)creds`), []string{"NATS_CREDS=" + string(creds)}, "static", "info", "ORDERS", "g", "--json")
}

// pki is a CA and the certificates and keys issued by it, as PEM files.
type pki struct {
	dir                string
	ca                 *x509.Certificate
	caKey              *ecdsa.PrivateKey
	CAFile             string
	ServerCert, SrvKey string
	ClientCert, CliKey string
	keys               []string // PEM of every private key made
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.CAFile = writeFile(t, p.dir, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	p.ServerCert, p.SrvKey = p.issue(t, "server", 2, x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.CliKey = p.issue(t, "client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// issue makes a certificate for 127.0.0.1 and its key.
func (p *pki) issue(t *testing.T, name string, serial int64, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	p.keys = append(p.keys, string(keyPEM))
	return writeFile(t, p.dir, name+".pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		writeFile(t, p.dir, name+"-key.pem", keyPEM)
}

// startTLS starts a server requiring TLS, and client certificates when
// verify is set.
func startTLS(t *testing.T, p *pki, verify bool) *server.Server {
	t.Helper()
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: p.ServerCert, KeyFile: p.SrvKey, CaFile: p.CAFile, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	o := natstest.Options(t.TempDir())
	o.TLS, o.TLSVerify, o.TLSConfig, o.TLSTimeout = true, verify, tc, 2
	return natstest.Start(t, o)
}

func tlsConnect(t *testing.T, s *server.Server, p *pki, verify bool) *nats.Conn {
	t.Helper()
	opts := []nats.Option{nats.RootCAs(p.CAFile)}
	if verify {
		opts = append(opts, nats.ClientCert(p.ClientCert, p.CliKey))
	}
	return connect(t, s.ClientURL(), opts...)
}

func TestTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "cg test")
	s := startTLS(t, p, false)
	stampedStream(t, tlsConnect(t, s, p, false))
	sec := &secrets{}
	sec.add(p.keys...)
	h := &harness{t: t, env: []string{"NATS_URL=" + s.ClientURL()}, secrets: sec}

	h.ok("--tlsca", nil, "static", "create", "balanced", "ORDERS", "g", "10", "m1", "m2", "--tlsca", p.CAFile)
	r := h.ok("NATS_CA --json", []string{"NATS_CA=" + p.CAFile}, "static", "info", "ORDERS", "g", "--json")
	if g, n := groupInfo(t, r); g != "g" || n != 2 {
		t.Fatalf("info --json: group %q with %d members\n%s", g, n, r)
	}

	tlsHint := regexp.MustCompile(`certificate signed by unknown authority; check --tlsca`)
	h.fail("no --tlsca", 1, tlsHint, nil, "static", "ls", "ORDERS")
	h.fail("no --tlsca --json", 1, tlsHint, nil, "static", "info", "ORDERS", "g", "--json")
	other := newPKI(t, "someone else's")
	sec.add(other.keys...)
	h.fail("another CA", 1, tlsHint, nil, "static", "ls", "ORDERS", "--tlsca", other.CAFile)
	// A key where the CA belongs: the file is named, the hint is about
	// TLS, and the key is not shown.
	r = h.fail("a key as --tlsca", 1, regexp.MustCompile(regexp.QuoteMeta(p.CliKey)+`.*--tlsca`), nil, "static", "ls", "ORDERS", "--tlsca", p.CliKey)
	if strings.Contains(r.Err, noServerHint) {
		t.Errorf("a bad CA file is worded as a missing server\n%s", r)
	}
	h.fail("--tlscert without --tlskey", 2, regexp.MustCompile(`--tlscert and --tlskey go together`), nil, "static", "ls", "ORDERS", "--tlsca", p.CAFile, "--tlscert", p.ClientCert)
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "cg test")
	s := startTLS(t, p, true)
	stampedStream(t, tlsConnect(t, s, p, true))
	sec := &secrets{}
	sec.add(p.keys...)
	h := &harness{t: t, env: []string{"NATS_URL=" + s.ClientURL()}, secrets: sec}
	mtls := []string{"--tlsca", p.CAFile, "--tlscert", p.ClientCert, "--tlskey", p.CliKey}

	h.ok("mTLS flags", nil, append([]string{"static", "create", "balanced", "ORDERS", "g", "10", "m1"}, mtls...)...)
	r := h.ok("mTLS env --json", []string{"NATS_CA=" + p.CAFile, "NATS_CERT=" + p.ClientCert, "NATS_KEY=" + p.CliKey}, "static", "info", "ORDERS", "g", "--json")
	if g, n := groupInfo(t, r); g != "g" || n != 1 {
		t.Fatalf("info --json: group %q with %d members\n%s", g, n, r)
	}

	// The server drops the connection after the handshake: whatever the
	// client reads first (an alert, a broken pipe, a reset), the error must
	// point at the client certificate, not at a missing server.
	h.fail("no client certificate", 1, tlsFlags, nil, "static", "ls", "ORDERS", "--tlsca", p.CAFile)
	h.fail("key of another certificate", 1, regexp.MustCompile(`private key does not match public key; check --tlsca, --tlscert and --tlskey`), nil,
		"static", "ls", "ORDERS", "--json", "--tlsca", p.CAFile, "--tlscert", p.ClientCert, "--tlskey", p.SrvKey)
	other := newPKI(t, "someone else's")
	sec.add(other.keys...)
	h.fail("client certificate of another CA", 1, tlsFlags, nil,
		"static", "ls", "ORDERS", "--tlsca", p.CAFile, "--tlscert", other.ClientCert, "--tlskey", other.CliKey)
}

// TestPermissions runs cg as users the server limits: one that may not use
// the JetStream API at all, one that may not touch the static groups' KV
// bucket. Each command must fail within its --timeout, saying that it was
// not permitted, and leave nothing behind.
func TestPermissions(t *testing.T) {
	t.Parallel()
	const adminPW, ordersPW, noKVPW = "admin-Secret-pw1", "orders-Secret-pw2", "nokv-Secret-pw3"
	o := natstest.Options(t.TempDir())
	o.Users = []*server.User{
		{Username: "admin", Password: adminPW},
		{Username: "orders", Password: ordersPW, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"orders.>", "_INBOX.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"orders.>", "_INBOX.>"}},
		}},
		{Username: "nokv", Password: noKVPW, Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{
				"$JS.API.*.*.KV_" + cg.StaticBucket,
				"$JS.API.DIRECT.GET.KV_" + cg.StaticBucket + ".>",
				"$KV." + cg.StaticBucket + ".>",
			}},
		}},
	}
	s := natstest.Start(t, o)
	js := stampedStream(t, connect(t, s.ClientURL(), nats.UserInfo("admin", adminPW)))
	ctx := context.Background()
	if _, err := cg.New(js).CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	sec := &secrets{}
	sec.add(adminPW, ordersPW, noKVPW)
	notPermitted := regexp.MustCompile(`(?i)permission|not permitted|not allowed`)

	for _, u := range []struct{ name, pw string }{{"orders", ordersPW}, {"nokv", noKVPW}} {
		for _, args := range [][]string{
			{"static", "info", "ORDERS", "g"},
			{"static", "ls", "ORDERS", "--json"},
			{"static", "create", "balanced", "ORDERS", "g2", "10", "m1"},
			{"static", "consume", "ORDERS", "g", "m1", "--count", "1"},
		} {
			t.Run(u.name+" "+strings.Join(args[:2], " "), func(t *testing.T) {
				t.Parallel()
				h := &harness{t: t, env: []string{"NATS_URL=" + s.ClientURL(), "NATS_USER=" + u.name, "NATS_PASSWORD=" + u.pw}, secrets: sec}
				h.fail(strings.Join(args, " "), 1, notPermitted, nil, append(args, "--timeout", "2s")...)
			})
		}
	}
	t.Cleanup(func() {
		// After the subtests: what they were refused left nothing behind.
		kv, err := js.KeyValue(ctx, cg.StaticBucket)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := kv.Keys(ctx)
		if err != nil || len(keys) != 1 || keys[0] != "ORDERS.g" {
			t.Errorf("static groups after refused commands: %v (%v)", keys, err)
		}
		s, err := js.Stream(ctx, "ORDERS")
		if err != nil {
			t.Fatal(err)
		}
		for name := range s.ListConsumers(ctx).Info() {
			t.Errorf("a refused command left consumer %s", name.Name)
		}
	})
}
