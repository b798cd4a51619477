package nriplugin

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/testwait"
)

// recordStore is a checkpoint in memory; it counts the records it holds.
type recordStore struct {
	recs map[allocation.Key]allocation.Allocation
}

func (s *recordStore) Put(a allocation.Allocation) error { s.recs[a.Key()] = a; return nil }
func (s *recordStore) Delete(k allocation.Key) error     { delete(s.recs, k); return nil }
func (s *recordStore) Load() ([]allocation.Allocation, error) {
	return nil, nil
}

// flushWithin runs flush, failing the whole test binary if it does not return by
// testwait.Deadline: a flush that never returns would also hang every later test that
// flushes or closes an agent, so the run ends here instead of at the test timeout.
func flushWithin(t *testing.T, p *persister) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.flush() }()
	timer := time.NewTimer(time.Until(testwait.Deadline(t)))
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		panic("persister flush did not return")
	}
}

// TestFlushReturnsOnceWritten: a flush with nothing queued returns at once, and one after
// a change returns once the change is in the checkpoint.
func TestFlushReturnsOnceWritten(t *testing.T) {
	store := &recordStore{recs: map[allocation.Key]allocation.Allocation{}}
	p := newPersister(store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := flushWithin(t, p); err != nil {
		t.Fatal(err)
	}
	p.put(allocation.Allocation{PodUID: "u", Container: "app", Type: allocation.TypeExclusive})
	if err := flushWithin(t, p); err != nil {
		t.Fatal(err)
	}
	if len(store.recs) != 1 {
		t.Errorf("after a flush the checkpoint holds %d records, want 1", len(store.recs))
	}
	p.del(allocation.Key{PodUID: "u", Container: "app"})
	if err := flushWithin(t, p); err != nil {
		t.Fatal(err)
	}
	if len(store.recs) != 0 {
		t.Errorf("after a flush the checkpoint holds %d records, want 0", len(store.recs))
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
}
