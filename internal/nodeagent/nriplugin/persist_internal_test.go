package nriplugin

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// batchLog is a checkpoint that keeps every batch it is given; written receives once per batch.
type batchLog struct {
	mu      sync.Mutex
	batches [][]string // per batch: "put <key>" and "del <key>"
	written chan struct{}
}

func (b *batchLog) WriteBatch(puts []allocation.Allocation, dels []allocation.Key) error {
	var got []string
	for _, a := range puts {
		got = append(got, "put "+a.Key().String())
	}
	for _, k := range dels {
		got = append(got, "del "+k.String())
	}
	slices.Sort(got)
	b.mu.Lock()
	b.batches = append(b.batches, got)
	b.mu.Unlock()
	b.written <- struct{}{}
	return nil
}

func (b *batchLog) Put(allocation.Allocation) error        { return errors.New("not batched") }
func (b *batchLog) Delete(allocation.Key) error            { return errors.New("not batched") }
func (b *batchLog) Load() ([]allocation.Allocation, error) { return nil, nil }

// TestPersisterGroupsABurst: a lone change is written at once; the changes that follow
// within the batch gap wait and go as one batch, in which a container removed before its
// record was written costs only its delete; a flush writes them without waiting for the gap.
func TestPersisterGroupsABurst(t *testing.T) {
	store := &batchLog{written: make(chan struct{}, 10)}
	p := newPersister(store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.gap = time.Hour // the burst below cannot outlast it
	defer func() { _ = p.close() }()

	p.put(allocation.Allocation{PodUID: "u", Container: "first"})
	<-store.written // the lone change, at once
	p.put(allocation.Allocation{PodUID: "u", Container: "short-lived"})
	p.del(allocation.Key{PodUID: "u", Container: "short-lived"})
	var want []string
	for i := range 20 {
		c := "c" + strconv.Itoa(i)
		p.put(allocation.Allocation{PodUID: "u", Container: c})
		want = append(want, "put u/"+c)
	}
	p.del(allocation.Key{PodUID: "u", Container: "first"})
	want = append(want, "del u/first", "del u/short-lived")
	slices.Sort(want)
	if err := p.flush(); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.batches) != 2 || !slices.Equal(store.batches[0], []string{"put u/first"}) ||
		!slices.Equal(store.batches[1], want) {
		t.Errorf("batches = %q, want [put u/first] then %q", store.batches, want)
	}
}
