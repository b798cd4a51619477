package admission

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/podfence/podfence/internal/regfile"
)

// CertReloader serves a TLS certificate read from a PEM certificate (chain) file and a PEM
// key file, and reads them again on Reload. A mounted Secret changes both files at once;
// when a pair does not load (one file written, not yet the other) the old pair stays.
type CertReloader struct {
	certFile, keyFile string
	mu                sync.Mutex // serialises Reload
	cur               atomic.Pointer[loadedCert]
}

type loadedCert struct {
	cert            *tls.Certificate
	certPEM, keyPEM []byte
}

// NewCertReloader loads the pair once; it fails when that does not work.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	c := &CertReloader{certFile: certFile, keyFile: keyFile}
	if _, err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the files and, when their content changed and loads, serves the new pair.
func (c *CertReloader) Reload() (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	certPEM, err := regfile.ReadFile(c.certFile)
	if err != nil {
		return false, fmt.Errorf("read TLS certificate: %w", err)
	}
	keyPEM, err := regfile.ReadFile(c.keyFile)
	if err != nil {
		return false, fmt.Errorf("read TLS key: %w", err)
	}
	if old := c.cur.Load(); old != nil && bytes.Equal(old.certPEM, certPEM) && bytes.Equal(old.keyPEM, keyPEM) {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("load TLS key pair %s, %s: %w", c.certFile, c.keyFile, err)
	}
	c.cur.Store(&loadedCert{cert: &cert, certPEM: certPEM, keyPEM: keyPEM})
	return true, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cur.Load().cert, nil
}
