package kafkaidempotency

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// commitTimeout bounds the commit of a revoke and of Run's end.
const commitTimeout = 10 * time.Second

// maxPollRecords bounds the records one poll hands out.
const maxPollRecords = 1000

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// run is one [Processor.Run]: its client and a goroutine per assigned
// partition.
type run struct {
	p   *Processor
	ctx context.Context
	cl  *kgo.Client

	mu      sync.Mutex
	room    *sync.Cond // on mu: a partition's queue shrank, stopped, or started retrying
	parts   map[tp]*partition
	stopped bool           // Run is ending: no new partition goroutine
	all     sync.WaitGroup // every partition goroutine, lost ones too
}

func newRun(ctx context.Context, p *Processor) *run {
	r := &run{p: p, ctx: ctx, parts: map[tp]*partition{}}
	r.room = sync.NewCond(&r.mu)
	return r
}

// poll hands each polled partition's records to its goroutine, until ctx
// ends or the client is closed. Rebalances are blocked from the poll to
// AllowRebalance, which follows at once: the records of a poll reach
// their partition's goroutine before that partition can be revoked, or
// assigned again, so a goroutine never gets another assignment's records.
// Before each poll it waits for room (see waitRoom): the client, not
// polled, fetches no more, so a busy consumer keeps what it fetched.
func (r *run) poll() {
	stopWaiting := context.AfterFunc(r.ctx, func() {
		r.mu.Lock()
		r.room.Broadcast()
		r.mu.Unlock()
	})
	defer stopWaiting()
	for {
		r.waitRoom()
		fetches := r.cl.PollRecords(r.ctx, maxPollRecords)
		if r.ctx.Err() != nil || fetches.IsClientClosed() {
			r.cl.AllowRebalance()
			return
		}
		r.mu.Lock()
		fetches.EachPartition(func(f kgo.FetchTopicPartition) {
			if part := r.parts[tp{f.Topic, f.Partition}]; part != nil && len(f.Records) > 0 {
				part.push(f.Records)
			} // else not ours any more: its next owner gets them
		})
		r.mu.Unlock()
		r.cl.AllowRebalance()
	}
}

// waitRoom returns once no partition's goroutine holds maxBuffered
// records or more, or ctx has ended. A partition that holds that many
// while it retries a record (which may take long) is paused instead of
// waited for, so that it does not hold the others back; it resumes once
// its queue is empty.
func (r *run) waitRoom() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.ctx.Err() == nil {
		full := false
		for _, part := range r.parts {
			switch {
			case len(part.queue) < maxBuffered || part.paused:
			case part.retrying:
				part.paused = true
				r.cl.PauseFetchPartitions(map[string][]int32{part.id.topic: {part.id.partition}})
			default:
				full = true
			}
		}
		if !full {
			return
		}
		r.room.Wait()
	}
}

// assigned starts a goroutine for each assigned partition.
func (r *run) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	for topic, parts := range assigned {
		for _, n := range parts {
			id := tp{topic, n}
			if r.parts[id] != nil {
				continue
			}
			part := &partition{r: r, id: id, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
			r.parts[id] = part
			r.all.Add(1)
			go part.work()
		}
	}
}

// revoked stops the revoked partitions' goroutines, waits until the record
// each has in hand is settled, and commits what is settled, before the
// rebalance goes on: the partitions' next owner starts after it.
func (r *run) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	for _, part := range r.detach(revoked) {
		<-part.done
	}
	r.commit(ctx)
}

// lost stops the lost partitions' goroutines without waiting: their
// commits would fail, and the group is not held for them. The record in
// hand is settled in the store all the same; its next owner finds the
// outcome, or meets the claim until it is stored.
func (r *run) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.detach(lost)
}

// detach removes the partitions' goroutines from the run, tells each to
// stop after its record in hand, and returns them.
func (r *run) detach(parts map[string][]int32) []*partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*partition
	for topic, ns := range parts {
		for _, n := range ns {
			id := tp{topic, n}
			if part := r.parts[id]; part != nil {
				delete(r.parts, id)
				part.stop()
				out = append(out, part)
			}
		}
	}
	r.room.Broadcast()
	return out
}

// stop ends the run's partitions after their records in hand, waits for
// them, and commits.
func (r *run) stop() {
	r.mu.Lock()
	r.stopped = true
	all := make(map[string][]int32)
	for id := range r.parts {
		all[id.topic] = append(all[id.topic], id.partition)
	}
	r.mu.Unlock()
	r.detach(all)
	r.all.Wait()
	r.commit(context.WithoutCancel(r.ctx))
}

// commit commits the offsets marked so far, bounded by commitTimeout. A
// failed commit leaves the records after the last one committed to be
// delivered again, where they find their outcomes.
func (r *run) commit(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	_ = r.cl.CommitMarkedOffsets(ctx)
}

// partition processes one assigned partition's records, in order. Its
// queue, paused and retrying are guarded by the run's mu.
type partition struct {
	r    *run
	id   tp
	wake chan struct{} // a push happened
	quit chan struct{} // closed by stop
	done chan struct{} // closed when work returns
	once sync.Once

	queue    []*kgo.Record
	paused   bool // its fetches are paused
	retrying bool // its record in hand waits to be tried again
}

// push queues records; r.mu is held.
func (part *partition) push(recs []*kgo.Record) {
	part.queue = append(part.queue, recs...)
	select {
	case part.wake <- struct{}{}:
	default:
	}
}

// stop tells work to return after the record in hand.
func (part *partition) stop() { part.once.Do(func() { close(part.quit) }) }

// stopped reports whether stop was called.
func (part *partition) stopped() bool {
	select {
	case <-part.quit:
		return true
	default:
		return false
	}
}

// next returns the next record, waiting for one, or nil once stopped.
func (part *partition) next() *kgo.Record {
	r := part.r
	for {
		if part.stopped() {
			return nil
		}
		r.mu.Lock()
		if n := len(part.queue); n > 0 {
			rec := part.queue[0]
			part.queue[0] = nil
			part.queue = part.queue[1:]
			if n == maxBuffered {
				r.room.Broadcast()
			}
			r.mu.Unlock()
			return rec
		}
		part.resume()
		r.mu.Unlock()
		select {
		case <-part.wake:
		case <-part.quit:
		}
	}
}

// resume resumes a paused partition's fetches; r.mu is held.
func (part *partition) resume() {
	if part.paused {
		part.paused = false
		part.r.cl.ResumeFetchPartitions(map[string][]int32{part.id.topic: {part.id.partition}})
	}
}

// work processes the partition's records in order until stopped; a record
// that stopping interrupts is left unsettled, for the partition's next
// owner.
func (part *partition) work() {
	defer part.r.all.Done()
	defer close(part.done)
	defer func() {
		part.r.mu.Lock()
		part.resume() // a pause would outlive the assignment
		part.queue = nil
		part.r.mu.Unlock()
	}()
	for rec := part.next(); rec != nil; rec = part.next() {
		if !part.r.p.settle(part, rec) {
			return
		}
		part.r.cl.MarkCommitRecords(rec)
	}
}

// sleep waits d, or until the partition is stopped, with the partition
// marked as retrying meanwhile; it reports whether the wait ran its
// course.
func (part *partition) sleep(d time.Duration) bool {
	r := part.r
	r.mu.Lock()
	part.retrying = true
	r.room.Broadcast()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		part.retrying = false
		r.mu.Unlock()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-part.quit:
		return false
	}
}
