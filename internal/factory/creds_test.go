package factory

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func writeTemp(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A credential where its file's path belongs, or a file that cannot be
// used, is refused before dialling, naming the setting (and the file) but
// never echoing the secret.
func TestCredentialSettings(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	damaged := []byte(string(seed))
	// Another base32 letter, so only the checksum is wrong (a flipped bit
	// could make it a non-base32 byte, '@' for 'A').
	if damaged[20] == 'A' {
		damaged[20] = 'B'
	} else {
		damaged[20] = 'A'
	}
	creds := "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVQSJ9.c2ln\n------END NATS USER JWT------\n\n" +
		"-----BEGIN USER NKEY SEED-----\n" + string(seed) + "\n------END USER NKEY SEED------\n"
	seedFile := writeTemp(t, "user.nk", string(seed))
	damagedFile := writeTemp(t, "damaged.nk", string(damaged))
	garbage := writeTemp(t, "garbage.creds", "-----BEGIN NATS USER JWT-----\nnot a jwt\n------END NATS USER JWT------\n")
	noSeed := writeTemp(t, "noseed.creds", "-----BEGIN NATS USER JWT-----\na.b.c\n------END NATS USER JWT------\n")
	missing := filepath.Join(t.TempDir(), "missing")

	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"seed as --nkey", nil, []string{"--nkey", string(seed)}, "--nkey needs the path of a file holding the seed, not the seed itself"},
		{"seed as NATS_NKEY", map[string]string{"NATS_NKEY": string(seed) + "\n"}, nil, "NATS_NKEY needs the path of a file holding the seed"},
		{"damaged seed as --nkey", nil, []string{"--nkey", string(damaged)}, "--nkey needs the path of a file holding the seed"},
		{"seed file content as --nkey", nil, []string{"--nkey", "-----BEGIN USER NKEY SEED-----\n" + string(seed)}, "--nkey needs the path"},
		{"creds content as --creds", nil, []string{"--creds", creds}, "--creds needs the path of a .creds file, not its content"},
		{"JWT as NATS_CREDS", map[string]string{"NATS_CREDS": "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVQSJ9.c2ln"}, nil, "NATS_CREDS needs the path of a .creds file"},
		{"missing seed file", nil, []string{"--nkey", missing}, "--nkey " + missing + ": cannot read the seed file: no such file or directory"},
		{"damaged seed file", nil, []string{"--nkey", damagedFile}, "--nkey " + damagedFile + " is not a valid seed file (nkeys: invalid checksum)"},
		{"missing creds file", map[string]string{"NATS_CREDS": missing}, nil, "NATS_CREDS " + missing + ": cannot read the credentials file: no such file or directory"},
		{"creds without a JWT", nil, []string{"--creds", garbage}, "--creds " + garbage + " is not a valid credentials file: it holds no user JWT"},
		{"creds without a seed", nil, []string{"--creds", noSeed}, "--creds " + noSeed + " is not a valid credentials file (nkeys: no nkey seed found)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newTestFactory(t, tt.env, tt.args...).resolve()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if cmdutil.IsUsage(err) {
				t.Errorf("a connection setting's error is not a usage error: %v", err)
			}
			for _, secret := range []string{string(seed)[:20], string(damaged)[:20], "eyJ0eXAi"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q leaks %q", err, secret)
				}
			}
		})
	}

	// A good seed file, and a user name that makes natscontext ignore a
	// bad one, pass.
	if _, err := newTestFactory(t, nil, "--nkey", seedFile).resolve(); err != nil {
		t.Fatalf("--nkey %s: %v", seedFile, err)
	}
	if _, err := newTestFactory(t, nil, "--user", "u", "--password", "p", "--creds", missing).resolve(); err != nil {
		t.Fatalf("--creds beside --user: %v", err)
	}
}

func TestScrubHidesSeedsAndJWTs(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	jwt := "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVQSJ9.c2lnbmF0dXJl"
	tg := &target{url: "nats://127.0.0.1:4222"}
	msg := tg.scrub(errors.New("open " + string(seed) + ": no such file; bad " + jwt)).Error()
	if strings.Contains(msg, string(seed)[:20]) || strings.Contains(msg, "eyJ0eXAi") {
		t.Fatalf("scrub left a secret: %q", msg)
	}
}

// A file the TLS settings name that cannot be used is worded as a TLS
// settings problem, naming the file, never as a missing server.
func TestTLSFileErrors(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := writeTemp(t, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	missing := filepath.Join(t.TempDir(), "ca.pem")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--tlsca", keyFile}, `failed to parse root certificate from "` + keyFile + `"; check --tlsca, --tlscert and --tlskey`},
		{[]string{"--tlsca", missing}, "--tlsca " + missing + ": cannot read it: no such file or directory; check --tlsca, --tlscert and --tlskey"},
	} {
		_, err := newTestFactory(t, nil, append(tt.args, "-s", closedPortURL(t, ""))...).Client()
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "cg server") {
			t.Errorf("%v: err = %v, want it to contain %q and no start-a-server hint", tt.args, err, tt.want)
		}
	}
}

// A user the server does not let use the JetStream API is told so at
// once, not after the timeout, and the refusal is kept for later errors.
func TestPermissionRefusal(t *testing.T) {
	o := natstest.Options(t.TempDir())
	o.Users = []*natsserver.User{{Username: "app", Password: "pw", Permissions: &natsserver.Permissions{
		Publish:   &natsserver.SubjectPermission{Allow: []string{"app.>", "_INBOX.>"}},
		Subscribe: &natsserver.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}}}
	s := natstest.Start(t, o)
	f := newTestFactory(t, map[string]string{"NATS_URL": s.ClientURL()}, "--user", "app", "--password", "pw", "--timeout", "10s")
	start := time.Now()
	_, err := f.Client()
	if err == nil {
		t.Fatal("a user without $JS.API permissions connected")
	}
	want := `this user may not use JetStream on NATS at ` + s.ClientURL() + ` (from NATS_URL): the server refused: Permissions Violation for Publish to "$JS.API.INFO"; ask for permission to publish to $JS.API.>`
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to contain %q", err, want)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the refusal took %s, as long as a timeout", took)
	}
	if got := f.Refused(); got != `Permissions Violation for Publish to "$JS.API.INFO"` {
		t.Errorf("Refused() = %q", got)
	}
	if got := newTestFactory(t, nil).Refused(); got != "" {
		t.Errorf("Refused() before any connection = %q", got)
	}
}

func TestRefusalsKeepOnlyPermissionViolations(t *testing.T) {
	var r refusals
	r.record(nats.ErrSlowConsumer)
	select {
	case <-r.refused():
		t.Fatal("a slow consumer error counted as a refusal")
	default:
	}
	r.record(fmt.Errorf("%w: %s", nats.ErrPermissionViolation, `Permissions Violation for Publish to "a"`))
	r.record(fmt.Errorf("%w: %s", nats.ErrPermissionViolation, "Permissions Violation for Subscription to\n\"b\""))
	<-r.refused()
	if got := r.lastRefusal(); got != `Permissions Violation for Subscription to "b"` {
		t.Fatalf("last refusal %q, want the last one, on one line", got)
	}
}

// With mutual TLS the server drops a client without a certificate it
// trusts; the client usually sees a broken pipe or a reset, not an alert.
func TestDroppedTLSConnection(t *testing.T) {
	dropped := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	tls := (&target{url: "tls://127.0.0.1:4222", tls: true}).connectError(dropped, time.Second).Error()
	if !strings.Contains(tls, "broken pipe as the TLS connection began: the server may require a valid client certificate; check --tlsca, --tlscert and --tlskey") {
		t.Errorf("over TLS: %s", tls)
	}
	plain := (&target{url: "nats://127.0.0.1:4222"}).connectError(dropped, time.Second).Error()
	if !strings.Contains(plain, "broken pipe; "+startHint) {
		t.Errorf("without TLS: %s", plain)
	}
	// The server asked for TLS though the settings did not: the dialer saw
	// the handshake begin.
	d := &recordingDialer{}
	c := &watchedConn{Conn: discardConn{}, d: d}
	_, _ = c.Write([]byte{0x16, 3, 1})
	if !d.sawTLS() || !(&target{url: "nats://127.0.0.1:4222", dialer: d}).tlsDropped(dropped) {
		t.Error("a TLS handshake on a nats:// URL went unnoticed")
	}
	d = &recordingDialer{}
	c = &watchedConn{Conn: discardConn{}, d: d}
	_, _ = c.Write([]byte("CONNECT {}\r\n"))
	_, _ = c.Write([]byte{0x16})
	if d.sawTLS() {
		t.Error("a plain connection counted as TLS")
	}
}

type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }
