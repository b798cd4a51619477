package events

import (
	"time"

	"golang.org/x/time/rate"
)

// limiter is a rate.Limiter per key: burst events at once, then one every interval. At
// maxKeys keys it forgets the limiters that are full again (a new one would be the same)
// and, if all are in use, all of them, so that it never grows past maxKeys. It is used by
// one goroutine only; time is given, so that a fake clock drives it.
type limiter struct {
	limit   rate.Limit
	burst   int
	maxKeys int
	keys    map[string]*rate.Limiter
}

func newLimiter(burst int, every time.Duration, maxKeys int) *limiter {
	return &limiter{limit: rate.Every(every), burst: burst, maxKeys: maxKeys, keys: map[string]*rate.Limiter{}}
}

// get returns key's limiter, a full one when key is new.
func (l *limiter) get(key string, now time.Time) *rate.Limiter {
	lim, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= l.maxKeys {
			l.prune(now)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.keys[key] = lim
	}
	return lim
}

func (l *limiter) prune(now time.Time) {
	for k, lim := range l.keys {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.keys, k)
		}
	}
	if len(l.keys) >= l.maxKeys {
		clear(l.keys)
	}
}

// allow takes a token from key's limiter and from global at now, only if both have one.
func allow(perKey *limiter, global *rate.Limiter, key string, now time.Time) bool {
	k := perKey.get(key, now)
	if k.TokensAt(now) < 1 || global.TokensAt(now) < 1 {
		return false
	}
	return k.AllowN(now, 1) && global.AllowN(now, 1)
}
