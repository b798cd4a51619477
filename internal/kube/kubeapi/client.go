package kubeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/podfence/podfence/internal/regfile"
)

// MaxResponse bounds the body of an answer Do reads (etcd bounds an object to 1.5 MiB).
const MaxResponse = 4 << 20

// Client sends requests to the API server of a Config. Create it with New; it is safe for
// concurrent use.
type Client struct {
	base      string       // scheme://host[:port][/prefix], without a trailing slash
	http      *http.Client // bounded requests (30 s)
	stream    *http.Client // watches: bounded by their context
	token     func() (string, error)
	userAgent string
}

// New returns a client for cfg whose requests carry userAgent.
func New(cfg Config, userAgent string) (*Client, error) {
	base, err := url.Parse(cfg.Host)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("API server address %q: want https://host:port", cfg.Host)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.Insecure}
	if len(cfg.CAData) > 0 {
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(cfg.CAData) {
			return nil, errors.New("API server CA: no PEM certificate in it")
		}
	}
	if len(cfg.CertData) > 0 {
		cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	c := &Client{base: strings.TrimSuffix(base.String(), "/"), http: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		stream: &http.Client{Transport: tr}, userAgent: userAgent, token: func() (string, error) { return cfg.Token, nil }}
	if cfg.TokenFile != "" { // re-read: the kubelet rotates projected service-account tokens
		c.token = func() (string, error) {
			b, err := regfile.ReadFile(cfg.TokenFile)
			if err != nil {
				return "", fmt.Errorf("read token: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		}
	}
	return c, nil
}

// Do sends one request: method on path (with its query, already escaped: "/api/v1/nodes/n1")
// with body, of contentType when body is not nil. It returns the answer's body and status
// code; err is only for a request that got no answer (or one longer than MaxResponse).
// Callers check the status, or use Call.
func (c *Client) Do(ctx context.Context, method, path, contentType string, body []byte) ([]byte, int, error) {
	req, err := c.request(ctx, method, path, contentType, body)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err // a *url.Error: `Patch "https://host/path": ...`
	}
	defer resp.Body.Close()
	return readAnswer(method, path, resp)
}

// request builds a request with the client's headers and a fresh token.
func (c *Client) request(ctx context.Context, method, path, contentType string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	token, err := c.token()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

// readAnswer reads a body of at most MaxResponse bytes.
func readAnswer(method, path string, resp *http.Response) ([]byte, int, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err == nil && len(b) > MaxResponse {
		err = fmt.Errorf("answer larger than %d bytes", MaxResponse)
	}
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: read answer (%s): %w", method, path, resp.Status, err)
	}
	return b, resp.StatusCode, nil
}

// Call is Do with the status checked: an answer other than 2xx is a *StatusError.
func (c *Client) Call(ctx context.Context, method, path, contentType string, body []byte) ([]byte, error) {
	b, code, err := c.Do(ctx, method, path, contentType, body)
	if err != nil {
		return nil, err
	}
	if err := Check(method, path, code, b); err != nil {
		return nil, err
	}
	return b, nil
}

// StatusError is an answer of the API server other than 2xx.
type StatusError struct {
	Method, Path string
	Code         int
	// Message is the API's explanation (a Status object's message), or "" when it gave none.
	Message string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Code, http.StatusText(e.Code))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Check returns nil for a 2xx code, else a *StatusError for the request method on path,
// with the message of the Status object in body, if it is one.
func Check(method, path string, code int, body []byte) error {
	if code/100 == 2 {
		return nil
	}
	var st struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &st) // not every answer is a Status (a proxy's HTML page)
	return &StatusError{Method: method, Path: path, Code: code, Message: st.Message}
}
