package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redlock/redlock/internal/redistest"
)

// pki is a CA and the certificates it signed, as PEM files in a directory.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	otherCA                                          string // a CA that signed nothing here
}

// newPKI writes a CA, a server certificate for 127.0.0.1 and a client certificate, each
// signed by the CA, and another CA, to files in a temporary directory.
func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	template := func(cn string) *x509.Certificate {
		serial++
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	}
	newCA := func(cn string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key, tmpl := newKey(), template(cn)
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		ca, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return ca, key, der
	}
	ca, caKey, caDER := newCA("redlock test CA")
	_, _, otherDER := newCA("another CA")
	leaf := func(name string, usage x509.ExtKeyUsage) (string, string) {
		key, tmpl := newKey(), template(name)
		tmpl.ExtKeyUsage, tmpl.KeyUsage = []x509.ExtKeyUsage{usage}, x509.KeyUsageDigitalSignature
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "PRIVATE KEY", keyDER)
	}
	p := &pki{ca: write("ca.crt", "CERTIFICATE", caDER), otherCA: write("other.crt", "CERTIFICATE", otherDER)}
	p.serverCert, p.serverKey = leaf("server", x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", x509.ExtKeyUsageClientAuth)
	return p
}

// startSecured starts a redis-server that also listens with TLS, asking clients for a
// certificate signed by p's CA, and whose only user is "locker" with password "s3cret"
// (the default user is off). It returns the server and its TLS address.
func startSecured(t *testing.T, p *pki) (*redistest.Server, string) {
	t.Helper()
	srv := redistest.Start(t, "--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKey,
		"--tls-ca-cert-file", p.ca, "--tls-auth-clients", "yes")
	var tlsAddr string
	for try := 1; tlsAddr == ""; try++ { // a free port, for the TLS listener
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if _, err := srv.Do("CONFIG", "SET", "tls-port", strconv.Itoa(port)); err == nil {
			tlsAddr = fmt.Sprintf("127.0.0.1:%d", port)
		} else if try == 5 {
			t.Fatalf("CONFIG SET tls-port: %v", err)
		}
	}
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", "locker", "on", ">s3cret", "~*", "&*", "+@all"},
		{"ACL", "SETUSER", "default", "off"}, // last: the test's own connection is the default user's
	} {
		if _, err := srv.Do(cmd...); err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
	}
	return srv, tlsAddr
}

// TestSecuredServer: over a server that takes only TLS clients with a certificate signed
// by its CA, and only the ACL user "locker", redlock run and redlock status work given the
// CA, the client certificate and key, the user and its password, by flags or from the
// environment, and valkey:// and valkeys:// URLs work as redis:// and rediss:// do. A wrong
// CA, a missing client certificate or a wrong password fail the run (69), which runs
// nothing.
func TestSecuredServer(t *testing.T) {
	t.Parallel() // see main_test.go
	p := newPKI(t)
	srv, tlsAddr := startSecured(t, p)
	dir := t.TempDir()
	passwordFile := filepath.Join(dir, "password")
	if err := os.WriteFile(passwordFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"-restart-guard", "0", "-node-timeout", testNodeTimeout}
	run := func(env []string, args ...string) (int, string) {
		t.Helper()
		args = append(append(append([]string{"run", "-name", "secured"}, common...), args...), sh(ranScript, dir)...)
		os.Remove(filepath.Join(dir, "ran"))
		code, _, stderr := runTool(t, env, args...)
		if ran := exists(filepath.Join(dir, "ran")); ran != (code == 0) {
			t.Errorf("%q: exit status %d, and the command ran: %v", args, code, ran)
		}
		return code, stderr
	}
	tlsFlags := []string{"-cacert", p.ca, "-cert", p.clientCert, "-key", p.clientKey}

	t.Run("flags", func(t *testing.T) {
		code, stderr := run(nil, append([]string{"-addrs", tlsAddr, "-user", "locker", "-password-file", passwordFile}, tlsFlags...)...)
		wantCode(t, code, stderr, 0)
	})
	t.Run("environment", func(t *testing.T) {
		env := []string{"REDIS_ADDRS=" + tlsAddr, "REDIS_CACERT=" + p.ca, "REDIS_CERT=" + p.clientCert, "REDIS_KEY=" + p.clientKey,
			"REDIS_USER=locker", "REDIS_PASSWORD=s3cret"}
		code, stderr := run(env)
		wantCode(t, code, stderr, 0)
		code, stdout, stderr := runTool(t, env, "status", "secured")
		wantCode(t, code, stderr, 0)
		if want := fmt.Sprintf("%s  free", tlsAddr); !containsLine(stdout, want) {
			t.Errorf("status: no line beginning %q:\n%s", want, stdout)
		}
	})
	t.Run("valkey URLs", func(t *testing.T) {
		code, stderr := run(nil, append([]string{"-addrs", "valkeys://locker:s3cret@" + tlsAddr}, tlsFlags...)...)
		wantCode(t, code, stderr, 0)
		code, stderr = run(nil, "-addrs", "valkey://locker:s3cret@"+srv.Addr())
		wantCode(t, code, stderr, 0)
	})
	t.Run("refused", func(t *testing.T) {
		creds := []string{"REDIS_USER=locker", "REDIS_PASSWORD=s3cret"}
		code, stderr := run(creds, "-nonblock", "-addrs", tlsAddr, "-cacert", p.otherCA, "-cert", p.clientCert, "-key", p.clientKey)
		wantCode(t, code, stderr, exitUnavailable, "certificate")
		code, stderr = run(creds, "-nonblock", "-addrs", tlsAddr, "-cacert", p.ca)
		wantCode(t, code, stderr, exitUnavailable)
		code, stderr = run(creds, "-nonblock", "-addrs", tlsAddr, "-tls") // the system's CAs: not the test's
		wantCode(t, code, stderr, exitUnavailable, "certificate signed by unknown authority")
		code, stderr = run([]string{"REDIS_USER=locker", "REDIS_PASSWORD=wrong"}, append([]string{"-nonblock", "-addrs", tlsAddr}, tlsFlags...)...)
		wantCode(t, code, stderr, exitUnavailable, "WRONGPASS")
		code, stderr = run(nil, "-nonblock", "-addrs", srv.Addr())
		wantCode(t, code, stderr, exitUnavailable)
	})
}

// containsLine reports whether a line of text begins with prefix.
func containsLine(text, prefix string) bool {
	return slices.ContainsFunc(strings.Split(text, "\n"), func(line string) bool { return strings.HasPrefix(line, prefix) })
}
