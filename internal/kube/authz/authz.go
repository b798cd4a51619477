// Package authz guards HTTP endpoints with the API server, as kube-rbac-proxy and
// controller-runtime's metrics filters do: a request's bearer token is reviewed with a
// TokenReview (authentication.k8s.io/v1), and its user must be allowed the request's verb
// on the request's path, a non-resource URL, by a SubjectAccessReview
// (authorization.k8s.io/v1). RBAC grants it with a ClusterRole rule such as
// {nonResourceURLs: ["/metrics"], verbs: ["get"]}.
//
// It speaks through package kubeapi (plain REST, no client-go: the agent's memory budget).
// Decisions are cached briefly by a hash of the token, so that a scrape every 15 s costs
// no API call most of the time.
package authz

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
)

// API is the part of kubeapi.Client the reviews use.
type API interface {
	Call(ctx context.Context, method, path, contentType string, body []byte) ([]byte, error)
}

// The API paths of the reviews.
const (
	TokenReviewPath         = "/apis/authentication.k8s.io/v1/tokenreviews"
	SubjectAccessReviewPath = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
)

// Options tune a Reviewer; zero fields take the defaults.
type Options struct {
	// Timeout bounds the API calls of one request (default 5 s): past it, 503.
	Timeout time.Duration
	// AllowTTL and DenyTTL are how long an allowed (default 2 min) and a refused (401 or 403,
	// default 1 min) decision is kept. Errors are not kept.
	AllowTTL, DenyTTL time.Duration
	// CacheSize bounds the decisions kept (default 1024; the least recently used goes).
	CacheSize int
	// ReviewsPerSecond bounds the reviews sent for tokens not in the cache (default 10, in
	// bursts of twice that): a flood of made-up tokens does not become a flood of API calls.
	ReviewsPerSecond float64
}

// Reviewer authenticates and authorises requests against the API server. Create it with
// New; it is safe for concurrent use.
type Reviewer struct {
	api     API
	opt     Options
	cache   *cache.LRUExpireCache
	limiter *rate.Limiter
	log     *slog.Logger
}

// New returns a Reviewer asking api.
func New(api API, opt Options, log *slog.Logger) *Reviewer {
	if opt.Timeout <= 0 {
		opt.Timeout = 5 * time.Second
	}
	if opt.AllowTTL <= 0 {
		opt.AllowTTL = 2 * time.Minute
	}
	if opt.DenyTTL <= 0 {
		opt.DenyTTL = time.Minute
	}
	if opt.CacheSize <= 0 {
		opt.CacheSize = 1024
	}
	if opt.ReviewsPerSecond <= 0 {
		opt.ReviewsPerSecond = 10
	}
	return &Reviewer{api: api, opt: opt, cache: cache.NewLRUExpireCache(opt.CacheSize),
		limiter: rate.NewLimiter(rate.Limit(opt.ReviewsPerSecond), int(2*opt.ReviewsPerSecond)), log: log}
}

// decision is the answer to one request: code 200 lets it through.
type decision struct {
	code int
	msg  string
}

// key is a cache key: the token's hash (never the token), verb and path.
type key struct {
	token      [sha256.Size]byte
	verb, path string
}

// Wrap serves next only to requests whose bearer token's user may do the request's verb
// (get for GET and HEAD) on its URL path: 401 without a token or with one the API server
// does not know, 403 when RBAC refuses, 503 when the API server cannot tell in time.
func (v *Reviewer) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := v.decide(r)
		if d.code == http.StatusOK {
			next.ServeHTTP(w, r)
			return
		}
		if d.code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="podfence"`)
		}
		http.Error(w, d.msg, d.code)
	})
}

func (v *Reviewer) decide(r *http.Request) decision {
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return decision{http.StatusUnauthorized, "Unauthorized: no bearer token"}
	}
	verb := verbs[r.Method]
	if verb == "" {
		return decision{http.StatusMethodNotAllowed, "method not allowed"}
	}
	k := key{token: sha256.Sum256([]byte(token)), verb: verb, path: r.URL.Path}
	if d, ok := v.cache.Get(k); ok {
		return d.(decision)
	}
	ctx, cancel := context.WithTimeout(r.Context(), v.opt.Timeout)
	defer cancel()
	d, err := v.review(ctx, token, verb, r.URL.Path)
	if err != nil {
		v.log.Warn("request not authorised: no answer from the API server", "path", r.URL.Path, "err", err)
		return decision{http.StatusServiceUnavailable, "cannot verify the token now; try again later"}
	}
	ttl := v.opt.DenyTTL
	if d.code == http.StatusOK {
		ttl = v.opt.AllowTTL
	}
	v.cache.Add(k, d, ttl)
	return d
}

// review asks the API server who token is and whether that user may verb path.
func (v *Reviewer) review(ctx context.Context, token, verb, path string) (decision, error) {
	if err := v.limiter.Wait(ctx); err != nil {
		return decision{}, fmt.Errorf("too many token reviews: %w", err)
	}
	var tr authnv1.TokenReview
	err := v.post(ctx, TokenReviewPath, &authnv1.TokenReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"},
		Spec:     authnv1.TokenReviewSpec{Token: token}}, &tr)
	if err != nil {
		return decision{}, err
	}
	if !tr.Status.Authenticated {
		return decision{http.StatusUnauthorized, "Unauthorized: the API server does not accept the token"}, nil
	}
	u := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, val := range u.Extra {
		extra[k] = authzv1.ExtraValue(val)
	}
	var sar authzv1.SubjectAccessReview
	err = v.post(ctx, SubjectAccessReviewPath, &authzv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authzv1.SubjectAccessReviewSpec{User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb}}}, &sar)
	if err != nil {
		return decision{}, err
	}
	if !sar.Status.Allowed {
		return decision{http.StatusForbidden, fmt.Sprintf("Forbidden: user %q may not %s %s", u.Username, verb, path)}, nil
	}
	return decision{code: http.StatusOK}, nil
}

// post sends review to the API server at path and decodes its answer into answer.
func (v *Reviewer) post(ctx context.Context, path string, review, answer any) error {
	body, err := json.Marshal(review)
	if err != nil {
		return fmt.Errorf("encode review: %w", err)
	}
	b, err := v.api.Call(ctx, http.MethodPost, path, "application/json", body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, answer); err != nil {
		return fmt.Errorf("POST %s: decode the answer: %w", path, err)
	}
	return nil
}

// verbs maps the methods served to Kubernetes request verbs (as the API server does for
// non-resource URLs); other methods are refused.
var verbs = map[string]string{http.MethodGet: "get", http.MethodHead: "get"}

// bearer is the token of an Authorization header "Bearer <token>" (the scheme in any case).
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}
