package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// NodeMeta is what the agent reads of a Node: its name, resource version and labels.
type NodeMeta struct {
	Name, ResourceVersion string
	Labels                map[string]string
}

// ParseNode reads a Node object (JSON, as the API server sends it): its metadata's name,
// resourceVersion and labels. Everything else is ignored.
func ParseNode(b []byte) (NodeMeta, error) {
	var n struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name            string            `json:"name"`
			ResourceVersion string            `json:"resourceVersion"`
			Labels          map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &n); err != nil {
		return NodeMeta{}, fmt.Errorf("decode Node: %w", err)
	}
	if n.Kind != "" && n.Kind != "Node" {
		return NodeMeta{}, fmt.Errorf("kind %q: want Node", n.Kind)
	}
	if n.Metadata.Name == "" {
		return NodeMeta{}, errors.New("decode Node: no metadata.name")
	}
	labels := n.Metadata.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	return NodeMeta{Name: n.Metadata.Name, ResourceVersion: n.Metadata.ResourceVersion, Labels: labels}, nil
}

// GetNode reads Node name (RBAC: get on nodes).
func (c *Client) GetNode(ctx context.Context, name string) (NodeMeta, error) {
	path := "/api/v1/nodes/" + url.PathEscape(name)
	b, err := c.Call(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return NodeMeta{}, err
	}
	n, err := ParseNode(b)
	if err != nil {
		return NodeMeta{}, fmt.Errorf("GET %s: %w", path, err)
	}
	if n.Name != name {
		return NodeMeta{}, fmt.Errorf("GET %s: answered with Node %q", path, n.Name)
	}
	return n, nil
}

// IsGone reports whether err is the API server's 410 Gone: a watch's resource version is
// too old, and the caller must read the object again.
func IsGone(err error) bool {
	var s *StatusError
	return errors.As(err, &s) && s.Code == http.StatusGone
}

// IsForbidden reports whether err is the API server's 403 Forbidden (RBAC).
func IsForbidden(err error) bool {
	var s *StatusError
	return errors.As(err, &s) && s.Code == http.StatusForbidden
}

// watchGrace is how long after the server's own timeout a watch's context ends: a connection
// that died silently must not hold the watcher forever.
const watchGrace = 30 * time.Second

// WatchNode watches Node name from resourceVersion rv (RBAC: watch on nodes; a single-object
// watch, fieldSelector metadata.name) and calls fn with each version of it. The server ends
// the watch after timeout; WatchNode then returns the last resource version seen and nil,
// to resume from. A 410 Gone (IsGone) means rv is too old: read the Node again.
func (c *Client) WatchNode(ctx context.Context, name, rv string, timeout time.Duration, fn func(NodeMeta)) (string, error) {
	q := url.Values{"fieldSelector": {"metadata.name=" + name}, "watch": {"true"}, "allowWatchBookmarks": {"true"},
		"resourceVersion": {rv}, "timeoutSeconds": {strconv.Itoa(max(1, int(timeout.Seconds())))}}
	path := "/api/v1/nodes?" + q.Encode()
	ctx, cancel := context.WithTimeout(ctx, timeout+watchGrace)
	defer cancel()
	req, err := c.request(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return rv, err
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return rv, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, code, err := readAnswer(http.MethodGet, path, resp)
		if err != nil {
			return rv, err
		}
		return rv, Check(http.MethodGet, path, code, b)
	}
	return DecodeNodeWatch(resp.Body, name, rv, fn)
}

// DecodeNodeWatch reads a watch stream of Node events (JSON objects {"type", "object"}, as
// the API server sends them) and calls fn with each version of Node name. It returns the last
// resource version seen (rv if none) and nil at the end of the stream, or the error that
// ended it: an ERROR event as a *StatusError, an event over MaxResponse bytes, bad JSON.
// DELETED and BOOKMARK events only advance the resource version.
func DecodeNodeWatch(r io.Reader, name, rv string, fn func(NodeMeta)) (string, error) {
	lr := &eventLimit{r: r}
	dec := json.NewDecoder(lr)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		lr.n = 0
		if err := dec.Decode(&ev); errors.Is(err, io.EOF) {
			return rv, nil
		} else if err != nil {
			return rv, fmt.Errorf("watch Node %s: %w", name, err)
		}
		switch ev.Type {
		case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
		case "ERROR":
			var st struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(ev.Object, &st)
			return rv, &StatusError{Method: "WATCH", Path: "/api/v1/nodes/" + name, Code: st.Code, Message: st.Message}
		default:
			return rv, fmt.Errorf("watch Node %s: event type %q: want ADDED, MODIFIED, DELETED, BOOKMARK or ERROR", name, ev.Type)
		}
		if ev.Type == "BOOKMARK" || ev.Type == "DELETED" {
			var m struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(ev.Object, &m); err != nil {
				return rv, fmt.Errorf("watch Node %s: %s event: %w", name, ev.Type, err)
			}
			if m.Metadata.ResourceVersion != "" {
				rv = m.Metadata.ResourceVersion
			}
			continue
		}
		n, err := ParseNode(ev.Object)
		if err != nil {
			return rv, fmt.Errorf("watch Node %s: %s event: %w", name, ev.Type, err)
		}
		if n.Name != name {
			return rv, fmt.Errorf("watch Node %s: %s event for Node %q", name, ev.Type, n.Name)
		}
		if n.ResourceVersion != "" {
			rv = n.ResourceVersion
		}
		fn(n)
	}
}

// eventLimit passes at most MaxResponse bytes between resets of n (before each event), then
// fails: no event over that size is ever read whole.
type eventLimit struct {
	r io.Reader
	n int
}

func (l *eventLimit) Read(p []byte) (int, error) {
	left := MaxResponse - l.n
	if left <= 0 {
		return 0, fmt.Errorf("watch event larger than %d bytes", MaxResponse)
	}
	if len(p) > left {
		p = p[:left]
	}
	n, err := l.r.Read(p)
	l.n += n
	return n, err
}
