package metrics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/podfence/podfence/internal/regfile"
)

// Auth is who may read /metrics and /state, a flag value (pflag.Value).
type Auth string

const (
	// AuthKubernetes: a bearer token whose user the API server allows get on the path
	// (TokenReview and SubjectAccessReview; Security.Guard), over HTTPS.
	AuthKubernetes Auth = "kubernetes"
	// AuthNone: anyone who reaches the address; loopback addresses only. "" is AuthNone.
	AuthNone Auth = "none"
)

func (a *Auth) Set(s string) error {
	if Auth(s) != AuthKubernetes && Auth(s) != AuthNone {
		return errors.New("want kubernetes (bearer tokens reviewed by the API server) or none (loopback addresses only)")
	}
	*a = Auth(s)
	return nil
}

func (a *Auth) String() string { return string(*a) }
func (a *Auth) Type() string   { return "string" }

// Security is how the server guards /metrics and /state. /healthz and /readyz are open (the
// kubelet probes them) and tell only ok or not.
type Security struct {
	Auth Auth
	// Guard wraps the handlers of /metrics and /state with AuthKubernetes (authz.Reviewer.Wrap).
	Guard func(http.Handler) http.Handler
	// CertFile and KeyFile are the serving certificate and key (PEM), re-read when they change
	// (a renewed Secret): a scraper can verify them (deploy/cert-manager issues one for the
	// name podfence-agent-metrics). Without them, the server makes a self-signed one at start
	// with AuthKubernetes, and serves plain HTTP with AuthNone.
	CertFile, KeyFile string
}

// CheckAuth returns an error, naming the agent's flags, when auth may not serve address:
// AuthNone only serves a loopback address (the agent runs with host networking).
func CheckAuth(auth Auth, address string) error {
	switch auth {
	case AuthKubernetes:
		return nil
	case "", AuthNone:
		if Loopback(address) {
			return nil
		}
		return fmt.Errorf("flag --metrics-auth=none with --metrics-address %q: unauthenticated metrics are served on a "+
			"loopback address only (127.0.0.1:PORT, [::1]:PORT or localhost:PORT); use --metrics-auth=kubernetes", address)
	default:
		return fmt.Errorf("flag --metrics-auth=%s: want kubernetes or none", auth)
	}
}

// Loopback reports whether address (host:port) is on a loopback interface only.
func Loopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsConfig is the server's TLS config and where its certificate comes from ("" for
// plain HTTP).
func (s Security) tlsConfig(address string) (*tls.Config, string, error) {
	var cert tls.Certificate
	var from string
	var err error
	switch {
	case (s.CertFile == "") != (s.KeyFile == ""):
		return nil, "", errors.New("flags --metrics-cert and --metrics-key: give both or neither")
	case s.CertFile != "":
		files := &certFiles{cert: s.CertFile, key: s.KeyFile}
		if err := files.load(); err != nil {
			return nil, "", fmt.Errorf("metrics serving certificate: %w", err)
		}
		return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: files.get}, s.CertFile, nil
	case s.Auth == AuthKubernetes:
		cert, err = selfSigned(address, time.Now())
		from = "self-signed"
	default:
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("metrics serving certificate: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, from, nil
}

// selfSigned makes a certificate and key for address, valid for a year from now, as
// controller-runtime's metrics server does without one given: clients skip verification
// (Prometheus: tls_config insecure_skip_verify) and still get an encrypted channel.
func selfSigned(address string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "podfence-agent"},
		NotBefore:    now.Add(-time.Hour), // clock skew
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host, _, err := net.SplitHostPort(address); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if ip == nil && host != "" && host != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, host)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// certFiles serves the key pair of two files, read again at a handshake when either changed
// (another inode, size or modification time: the kubelet renames a Secret volume's new
// files into place); a pair that does not load keeps the last good one.
type certFiles struct {
	cert, key string

	mu    sync.Mutex
	cur   *tls.Certificate
	stamp [2]fileStamp
}

type fileStamp struct {
	ino, size int64
	mtime     time.Time
}

func (c *certFiles) stamps() [2]fileStamp {
	var st [2]fileStamp
	for i, p := range []string{c.cert, c.key} {
		if fi, err := os.Stat(p); err == nil {
			st[i] = fileStamp{size: fi.Size(), mtime: fi.ModTime()}
			if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
				st[i].ino = int64(sys.Ino)
			}
		}
	}
	return st
}

// load reads the pair (regfile: a FIFO is refused, not waited on).
func (c *certFiles) load() error {
	st := c.stamps()
	cert, err := regfile.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return err
	}
	c.cur, c.stamp = &cert, st
	return nil
}

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stamps() != c.stamp {
		_ = c.load() // on error the last good pair stays, and the next handshake tries again
	}
	return c.cur, nil
}
