package nriplugin

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// persister writes allocation changes to the checkpoint from one goroutine. Handlers only
// queue a change (a map write); changes to the same key coalesce to the latest, so a burst
// of creates and removes costs at most one write per container. After a crash the runtime's
// container cpusets rebuild the state (Synchronize), so a lost queue loses no CPUs.
type persister struct {
	store Checkpoint
	log   *slog.Logger
	wake  chan struct{} // capacity 1: "pending is not empty"
	now   chan struct{} // capacity 1: "a flush waits: write without the gap"
	stop  chan struct{}
	done  chan struct{}
	gap   time.Duration // least time between two batches (group commit)

	mu      sync.Mutex
	cond    *sync.Cond // signalled when written advances
	pending map[allocation.Key]*allocation.Allocation
	queued  uint64 // changes queued so far
	written uint64 // changes written (or failed) so far
	errs    []error
	closed  bool
}

func newPersister(store Checkpoint, log *slog.Logger) *persister {
	p := &persister{store: store, log: log, wake: make(chan struct{}, 1), now: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), gap: batchGap,
		pending: map[allocation.Key]*allocation.Allocation{}}
	p.cond = sync.NewCond(&p.mu)
	go p.loop()
	return p
}

// put queues a write of a.
func (p *persister) put(a allocation.Allocation) { p.queue(a.Key(), &a) }

// del queues the removal of k's record.
func (p *persister) del(k allocation.Key) { p.queue(k, nil) }

func (p *persister) queue(k allocation.Key, a *allocation.Allocation) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.log.Error("checkpoint change after shutdown, not written", "podUID", k.PodUID, "container", k.Container)
		return
	}
	p.pending[k] = a
	p.queued++
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// batchGap is the least time between two checkpoint batches: a burst of changes waits for
// it and is written as one batch (group commit), in which a container's put and delete
// cancel. A lone change after a quiet spell is written at once.
const batchGap = 2 * time.Millisecond

func (p *persister) loop() {
	defer close(p.done)
	var last time.Time
	for {
		select {
		case <-p.wake:
			if wait := time.Until(last.Add(p.gap)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-p.now:
				case <-p.stop:
				}
				t.Stop()
			}
			p.writeBatch()
			last = time.Now()
		case <-p.stop:
			p.writeBatch()
			return
		}
	}
}

// writeBatch writes everything pending.
func (p *persister) writeBatch() {
	p.mu.Lock()
	batch, upTo := p.pending, p.queued
	p.pending = map[allocation.Key]*allocation.Allocation{}
	p.mu.Unlock()
	var errs []error
	if b, ok := p.store.(batchWriter); ok {
		if err := p.writeAll(b, batch); err != nil {
			p.log.Error("checkpoint write failed", "changes", len(batch), "err", err)
			errs = append(errs, err)
		}
	} else {
		for k, a := range batch {
			if err := p.write(k, a); err != nil {
				p.log.Error("checkpoint write failed", "podUID", k.PodUID, "container", k.Container, "err", err)
				errs = append(errs, err)
			}
		}
	}
	p.mu.Lock()
	p.written = upTo
	p.errs = append(p.errs, errs...)
	p.cond.Broadcast()
	p.mu.Unlock()
}

// batchWriter is a checkpoint that writes many changes with one sync (checkpoint.Store).
type batchWriter interface {
	WriteBatch(puts []allocation.Allocation, dels []allocation.Key) error
}

// writeAll writes a batch through b; a panicking store fails the batch, not the agent.
func (p *persister) writeAll(b batchWriter, batch map[allocation.Key]*allocation.Allocation) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("checkpoint batch of %d changes: panic: %v", len(batch), r)
		}
	}()
	var puts []allocation.Allocation
	var dels []allocation.Key
	for k, a := range batch {
		if a == nil {
			dels = append(dels, k)
		} else {
			puts = append(puts, *a)
		}
	}
	return b.WriteBatch(puts, dels)
}

// write stores one change; a panicking store fails the write, not the agent.
func (p *persister) write(k allocation.Key, a *allocation.Allocation) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("checkpoint of container %q of pod %q: panic: %v", k.Container, k.PodUID, r)
		}
	}()
	if a == nil {
		return p.store.Delete(k)
	}
	return p.store.Put(*a)
}

// hurry has the writer write what is queued without waiting for the batch gap.
func (p *persister) hurry() {
	select {
	case p.now <- struct{}{}:
	default:
	}
}

// flush waits for every change queued before the call.
func (p *persister) flush() error {
	p.hurry()
	p.mu.Lock()
	defer p.mu.Unlock()
	target := p.queued
	for p.written < target {
		p.cond.Wait()
	}
	errs := p.errs
	p.errs = nil
	if len(errs) > 0 {
		return fmt.Errorf("write checkpoint: %w", errors.Join(errs...))
	}
	return nil
}

// close writes what is pending and stops the writer; later changes are not written.
func (p *persister) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	return p.flush()
}
