package events

import "time"

// limiter is a token bucket per key: burst tokens, one more every interval. It is used by
// one goroutine only.
type limiter struct {
	burst   float64
	every   time.Duration
	maxKeys int
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(burst int, every time.Duration, maxKeys int) *limiter {
	return &limiter{burst: float64(burst), every: every, maxKeys: maxKeys, buckets: map[string]*bucket{}}
}

// refill returns key's bucket with the tokens earned since its last use.
func (l *limiter) refill(key string, now time.Time) *bucket {
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.maxKeys {
			l.prune(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
		return b
	}
	if l.every > 0 && now.After(b.last) {
		b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.last))/float64(l.every))
	}
	b.last = now
	return b
}

// prune forgets the buckets that are full again (a new one would be the same); if all are
// in use, it forgets them all rather than grow without bound.
func (l *limiter) prune(now time.Time) {
	for k := range l.buckets {
		if l.refill(k, now).tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= l.maxKeys {
		clear(l.buckets)
	}
}

// allow takes a token from key's bucket and from the global bucket, only if both have one.
func allow(perKey, global *limiter, key string, now time.Time) bool {
	k, g := perKey.refill(key, now), global.refill("", now)
	if k.tokens < 1 || g.tokens < 1 {
		return false
	}
	k.tokens--
	g.tokens--
	return true
}
