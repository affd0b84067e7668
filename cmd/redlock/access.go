package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"net"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// access is how redlock reaches the nodes: their addresses, and for secured servers TLS (a
// CA, a client certificate) and an ACL user with its password. Each setting comes from
// its flag, or else from the environment (see accessEnv).
type access struct {
	addrs        string // -addrs
	tls          bool   // -tls
	cacert       string // -cacert: a PEM file
	cert, key    string // -cert, -key: PEM files
	user         string // -user
	passwordFile string // -password-file
}

// The environment variables that give what a flag does not.
const (
	envAddrs    = "REDIS_ADDRS"
	envCACert   = "REDIS_CACERT"
	envCert     = "REDIS_CERT"
	envKey      = "REDIS_KEY"
	envUser     = "REDIS_USER"
	envPassword = "REDIS_PASSWORD" // the password itself
)

// accessFlags defines the flags that fill a.
func accessFlags(fs *flag.FlagSet, a *access) {
	fs.StringVar(&a.addrs, "addrs", "", "the Redis masters, comma-separated `host:port,...`, or redis://, rediss://, valkey://\n"+
		"or valkeys:// URLs (for a user and password, a database or TLS) (default $"+envAddrs+")")
	fs.BoolVar(&a.tls, "tls", false, "connect to the host:port addresses over TLS, as to rediss:// URLs; the servers'\n"+
		"certificates are checked against the system's CAs, or -cacert's")
	fs.StringVar(&a.cacert, "cacert", "", "`file` of PEM CA certificates that the servers' certificates must chain to;\n"+
		"implies -tls (default $"+envCACert+")")
	fs.StringVar(&a.cert, "cert", "", "`file` of the PEM client certificate to show the servers (tls-auth-clients),\n"+
		"with -key; implies -tls (default $"+envCert+")")
	fs.StringVar(&a.key, "key", "", "`file` of the PEM private key of -cert (default $"+envKey+")")
	fs.StringVar(&a.user, "user", "", "the ACL `user` to authenticate as; a URL's own user comes first (default\n$"+envUser+")")
	fs.StringVar(&a.passwordFile, "password-file", "", "`file` whose first line is the password of -user (or of the default user); a\n"+
		"URL's own password comes first (default: $"+envPassword+", the password itself)")
}

// nodes returns the go-redis options of every address, with TLS and credentials applied.
// set holds the flags given; getenv reads the environment for the others. It returns a
// usageError for a bad address, file or combination.
func (a *access) nodes(set map[string]bool, getenv func(string) string) ([]*redis.Options, error) {
	from := func(flagName, env string, v *string) string { // where *v came from, for messages
		if set[flagName] {
			return "-" + flagName
		}
		*v = getenv(env)
		return "$" + env
	}
	addrsFrom := from("addrs", envAddrs, &a.addrs)
	caFrom := from("cacert", envCACert, &a.cacert)
	certFrom := from("cert", envCert, &a.cert)
	keyFrom := from("key", envKey, &a.key)
	from("user", envUser, &a.user)
	opts, urls, err := parseAddrList(a.addrs)
	if err != nil {
		return nil, usagef("%s: %v", addrsFrom, err)
	}
	password := getenv(envPassword)
	if set["password-file"] {
		b, err := os.ReadFile(a.passwordFile)
		if err != nil {
			return nil, usagef("-password-file: %v", err)
		}
		password, _, _ = strings.Cut(string(b), "\n")
		password = strings.TrimSuffix(password, "\r")
	}
	conf, err := a.tlsConfig(caFrom, certFrom, keyFrom)
	if err != nil {
		return nil, err
	}
	for i, o := range opts {
		if o.Username == "" && o.Password == "" {
			o.Username, o.Password = a.user, password
		}
		if conf == nil && !a.tls {
			continue
		}
		if o.TLSConfig == nil && !urls[i] {
			host, _, _ := net.SplitHostPort(o.Addr)
			o.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		if o.TLSConfig == nil {
			what := "-tls"
			if conf != nil {
				what = caFrom
				if a.cacert == "" {
					what = certFrom
				}
			}
			return nil, usagef("%s applies to TLS, but %s is a URL without TLS: give it as rediss:// or valkeys://", what, o.Addr)
		}
		if conf != nil {
			o.TLSConfig.RootCAs, o.TLSConfig.Certificates = conf.RootCAs, conf.Certificates
		}
	}
	return opts, nil
}

// tlsConfig returns the CA pool and client certificate of a, or nil if it names neither.
// The from arguments say where each file's name came from, for messages.
func (a *access) tlsConfig(caFrom, certFrom, keyFrom string) (*tls.Config, error) {
	if a.cacert == "" && a.cert == "" && a.key == "" {
		return nil, nil
	}
	conf := &tls.Config{}
	if a.cacert != "" {
		pem, err := os.ReadFile(a.cacert)
		if err != nil {
			return nil, usagef("%s: %v", caFrom, err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usagef("%s: no PEM certificate in %s", caFrom, a.cacert)
		}
	}
	switch {
	case a.cert != "" && a.key == "":
		return nil, usagef("%s needs its private key: give -key (or $%s)", certFrom, envKey)
	case a.cert == "" && a.key != "":
		return nil, usagef("%s is the key of a client certificate: give -cert (or $%s)", keyFrom, envCert)
	case a.cert != "":
		pair, err := tls.LoadX509KeyPair(a.cert, a.key)
		if err != nil {
			return nil, usagef("%s and %s: %v", certFrom, keyFrom, err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// accessUsage is what the usages say of the environment and secured servers.
const accessUsage = `
Secured servers: -tls, -cacert, -cert and -key connect over TLS (rediss:// and
valkeys:// URLs always do); -user and -password-file authenticate as an ACL user.
Each has its environment variable, read when the flag is not given: $REDIS_ADDRS,
$REDIS_CACERT, $REDIS_CERT, $REDIS_KEY, $REDIS_USER, and $REDIS_PASSWORD (the
password itself, which a flag would show to ps). A URL's own user and password come
first.
`
