package events

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
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxMessage bounds an event's message, as the events API does for its note.
const maxMessage = 1024

// Client posts events to the API server of Config. Create it with NewClient.
type Client struct {
	base  *url.URL
	http  *http.Client
	token func() (string, error)
	// Component and Host are the event's source: "podfence-agent" and the node name.
	component, host string
}

var _ Sink = (*Client)(nil)

// NewClient returns a client for cfg whose events name component on host as their source.
func NewClient(cfg Config, component, host string) (*Client, error) {
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
	c := &Client{base: base, http: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		component: component, host: host, token: func() (string, error) { return cfg.Token, nil }}
	if cfg.TokenFile != "" { // re-read: the kubelet rotates projected service-account tokens
		c.token = func() (string, error) {
			b, err := os.ReadFile(cfg.TokenFile)
			if err != nil {
				return "", fmt.Errorf("read token: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		}
	}
	return c, nil
}

// Post creates e as a core/v1 Event on its pod.
func (c *Client) Post(ctx context.Context, e Event, at time.Time) error {
	body, err := json.Marshal(c.object(e, at))
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	path := "/api/v1/namespaces/" + url.PathEscape(e.Namespace) + "/events"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.base.String(), "/")+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post event: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	token, err := c.token()
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("post event: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var st metav1.Status
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &st) == nil && st.Message != "" {
			return fmt.Errorf("post event to %s: %s: %s", path, resp.Status, st.Message)
		}
		return fmt.Errorf("post event to %s: %s", path, resp.Status)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// object is e as the API's Event, named as client-go's recorder names them.
func (c *Client) object(e Event, at time.Time) *corev1.Event {
	msg := e.Message
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: e.Namespace, Name: e.Pod, UID: types.UID(e.PodUID)}
	if e.Container != "" {
		ref.FieldPath = fmt.Sprintf("spec.containers{%s}", e.Container)
	}
	t := metav1.NewTime(at)
	return &corev1.Event{
		TypeMeta:            metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", e.Pod, at.UnixNano()), Namespace: e.Namespace},
		InvolvedObject:      ref,
		Reason:              e.Reason,
		Message:             msg,
		Type:                e.Type,
		Source:              corev1.EventSource{Component: c.component, Host: c.host},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		ReportingController: "podfence.io/agent",
		ReportingInstance:   c.host,
	}
}
