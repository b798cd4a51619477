package authz_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/podfence/podfence/internal/kube/authz"
	"github.com/podfence/podfence/internal/kube/authz/authztest"
	"github.com/podfence/podfence/internal/kube/kubeapi"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// lockedBuffer is a log written by the server's goroutines and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// noTimeout stands for opt's zero Timeout, AllowTTL and DenyTTL in these tests: longer than
// any test run, so that a loaded machine meets no limit the test is not about.
const noTimeout = time.Hour

// secret serves "secret".
var secret = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "secret\n") })

// guarded serves secret at every path behind a Reviewer asking api, with opt's zero
// durations noTimeout.
func guarded(t *testing.T, api *authztest.APIServer, opt authz.Options) *httptest.Server {
	t.Helper()
	for _, d := range []*time.Duration{&opt.Timeout, &opt.AllowTTL, &opt.DenyTTL} {
		if *d == 0 {
			*d = noTimeout
		}
	}
	srv := httptest.NewServer(authz.New(api.Client(t), opt, quiet()).Wrap(secret))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, token string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// TestReview: no token is 401 without an API call; an unknown token 401; a user without RBAC
// for the path 403; an allowed one gets through. Each decision is asked once (TokenReview,
// then SubjectAccessReview) and then kept: repeated requests make no API call.
func TestReview(t *testing.T) {
	api := authztest.New(t)
	api.User("prom-token", "system:serviceaccount:monitoring:prometheus", "/metrics")
	api.User("dev-token", "dev")
	srv := guarded(t, api, authz.Options{})
	for _, tc := range []struct {
		name, path, token string
		code              int
		body              string
		tokenReviews      int // the calls made by the end of this step
		accessReviews     int
	}{
		{name: "no token", path: "/metrics", code: 401, body: "Unauthorized: no bearer token\n"},
		{name: "unknown token", path: "/metrics", token: "made-up", code: 401,
			body: "Unauthorized: the API server does not accept the token\n", tokenReviews: 1},
		{name: "unknown token again: cached", path: "/metrics", token: "made-up", code: 401, tokenReviews: 1},
		{name: "user without RBAC", path: "/metrics", token: "dev-token", code: 403,
			body: "Forbidden: user \"dev\" may not get /metrics\n", tokenReviews: 2, accessReviews: 1},
		{name: "user without RBAC again: cached", path: "/metrics", token: "dev-token", code: 403, tokenReviews: 2, accessReviews: 1},
		{name: "allowed", path: "/metrics", token: "prom-token", code: 200, body: "secret\n", tokenReviews: 3, accessReviews: 2},
		{name: "allowed again: cached", path: "/metrics", token: "prom-token", code: 200, body: "secret\n", tokenReviews: 3,
			accessReviews: 2},
		{name: "allowed a path, not another", path: "/state", token: "prom-token", code: 403, tokenReviews: 4, accessReviews: 3},
	} {
		code, body, h := get(t, srv.URL+tc.path, tc.token)
		if code != tc.code || tc.body != "" && body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, body, tc.code, tc.body)
		}
		if code == 401 && h.Get("WWW-Authenticate") != `Bearer realm="podfence"` {
			t.Errorf("%s: WWW-Authenticate %q", tc.name, h.Get("WWW-Authenticate"))
		}
		if tr, sar := api.Calls(authz.TokenReviewPath), api.Calls(authz.SubjectAccessReviewPath); tr != tc.tokenReviews ||
			sar != tc.accessReviews {
			t.Errorf("%s: %d TokenReviews and %d SubjectAccessReviews so far, want %d and %d", tc.name, tr, sar,
				tc.tokenReviews, tc.accessReviews)
		}
	}
}

// TestReviewExpires: a kept decision is asked again once its time is up.
func TestReviewExpires(t *testing.T) {
	api := authztest.New(t)
	api.User("prom-token", "prometheus", "/metrics")
	srv := guarded(t, api, authz.Options{AllowTTL: time.Nanosecond})
	for range 2 {
		if code, _, _ := get(t, srv.URL+"/metrics", "prom-token"); code != 200 {
			t.Fatalf("%d", code)
		}
	}
	if n := api.Calls(authz.TokenReviewPath); n != 2 {
		t.Errorf("%d TokenReviews, want 2 (the first decision expired)", n)
	}
}

// TestAPIServerDown: an API server that does not answer in time, or at all, is 503 at the
// timeout, and nothing is kept: the next request asks again. In a synctest bubble, with the
// API server in process: the timeout passes only while every goroutine waits, so it is met
// exactly, and the answer after it comes however slow the machine.
func TestAPIServerDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 100 * time.Millisecond
		api := &inProcessAPI{hang: make(chan struct{})}
		h := authz.New(api, authz.Options{Timeout: timeout}, quiet()).Wrap(secret)
		get := func(token string) (int, string) {
			rec := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			r.Header.Set("Authorization", "Bearer "+token)
			h.ServeHTTP(rec, r)
			return rec.Code, rec.Body.String()
		}
		start := time.Now()
		if code, body := get("prom-token"); code != 503 || body != "cannot verify the token now; try again later\n" {
			t.Errorf("API server hanging: %d %q", code, body)
		}
		if d := time.Since(start); d != timeout {
			t.Errorf("answered after %s, want the timeout %s", d, timeout)
		}
		api.set(nil, false)
		if code, _ := get("prom-token"); code != 200 {
			t.Errorf("API server back: %d", code)
		}
		if n := api.count(); n != 3 {
			t.Errorf("%d API calls, want 3: the TokenReview that hung, then both reviews again", n)
		}
		api.set(nil, true)
		if code, _ := get("other-token"); code != 503 {
			t.Errorf("API server down: %d", code)
		}
	})
}

// inProcessAPI answers reviews without a network: every token is user prometheus, allowed
// everything. Its calls wait while hang is open (or until their context ends); down fails
// them at once.
type inProcessAPI struct {
	mu    sync.Mutex
	hang  chan struct{}
	down  bool
	calls int
}

func (a *inProcessAPI) set(hang chan struct{}, down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hang, a.down = hang, down
}

func (a *inProcessAPI) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

func (a *inProcessAPI) Call(ctx context.Context, _, path, _ string, _ []byte) ([]byte, error) {
	a.mu.Lock()
	a.calls++
	hang, down := a.hang, a.down
	a.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if down {
		return nil, errors.New("connection refused")
	}
	switch path {
	case authz.TokenReviewPath:
		return []byte(`{"status":{"authenticated":true,"user":{"username":"prometheus"}}}`), nil
	case authz.SubjectAccessReviewPath:
		return []byte(`{"status":{"allowed":true}}`), nil
	}
	return nil, fmt.Errorf("POST %s: 404 Not Found", path)
}

// TestAgentWithoutRBAC: an agent whose own service account may not create reviews (the API
// server answers 403) serves 503, not 401 or 403: the caller's token is not at fault.
func TestAgentWithoutRBAC(t *testing.T) {
	api := authztest.New(t)
	api.User("prom-token", "prometheus", "/metrics")
	c, err := kubeapi.New(kubeapi.Config{Host: api.URL, CAData: api.CAPEM(), Token: "agent-without-rbac"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	h := authz.New(c, authz.Options{Timeout: noTimeout}, slog.New(slog.NewTextHandler(&logs, nil))).Wrap(http.NotFoundHandler())
	srv := httptest.NewServer(h)
	defer srv.Close()
	if code, _, _ := get(t, srv.URL+"/metrics", "prom-token"); code != 503 {
		t.Errorf("%d, want 503", code)
	}
	if want := "403 Forbidden: forbidden"; !strings.Contains(logs.String(), want) {
		t.Errorf("log %q lacks %q", logs.String(), want)
	}
}

// TestMethods: HEAD is get; other methods are refused without an API call; the scheme
// "bearer" is case-insensitive.
func TestMethods(t *testing.T) {
	api := authztest.New(t)
	api.User("prom-token", "prometheus", "/metrics")
	srv := guarded(t, api, authz.Options{})
	for _, tc := range []struct {
		method, auth string
		code         int
	}{
		{http.MethodHead, "Bearer prom-token", 200},
		{http.MethodGet, "bearer prom-token", 200},
		{http.MethodGet, "Basic cHJvbTpwcm9t", 401},
		{http.MethodGet, "Bearer ", 401},
		{http.MethodPost, "Bearer other-token", 405},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", tc.auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %q: %d, want %d", tc.method, tc.auth, resp.StatusCode, tc.code)
		}
	}
	if n := api.Calls(authz.TokenReviewPath); n != 1 {
		t.Errorf("%d TokenReviews, want 1", n)
	}
}
