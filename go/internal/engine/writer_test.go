package engine

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Batches of batchFrames frames (writer.go): a batch held back by a cork
// or handed to the background flusher leaves once it holds batchFrames
// frames, or as many as setBatch set.

func TestACorkedBatchLeavesOnceItHoldsBatchFrames(t *testing.T) {
	r := &recorder{}
	w := newWriter(r, DefaultWriteQueue)
	w.cork()
	var want []byte
	for i := range batchFrames - 1 {
		w.push([]byte{byte(i)}, nil, false)
		want = append(want, byte(i))
	}
	if got := r.got(); len(got) != 0 {
		t.Fatalf("written while corked with %d frames: %v", batchFrames-1, got)
	}
	w.push([]byte{batchFrames - 1}, nil, false)
	want = append(want, batchFrames-1)
	if got := r.got(); len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Fatalf("a corked batch of %d frames leaves at once, in one write: %v", batchFrames, got)
	}
	for i := byte(100); i < 103; i++ {
		w.push([]byte{i}, nil, false)
	}
	if len(r.got()) != 1 {
		t.Fatal("the frames after the batch were written while corked")
	}
	w.uncork()
	if got := r.got(); len(got) != 2 || !bytes.Equal(got[1], []byte{100, 101, 102}) {
		t.Fatalf("the rest leaves in one write at uncork: %v", got)
	}
	w.close("done")
}

// With calls in flight, a batch is half of them, between batchFrames and
// batchMax frames (setBatch).
func TestACorkedBatchGrowsWithTheCallsInFlight(t *testing.T) {
	for _, c := range []struct{ inFlight, frames int }{{256, batchMax}, {64, 32}, {10, batchFrames}} {
		r := &recorder{}
		w := newWriter(r, DefaultWriteQueue)
		w.setBatch(c.inFlight)
		w.cork()
		var want []byte
		for i := range c.frames - 1 {
			w.push([]byte{byte(i)}, nil, false)
			want = append(want, byte(i))
		}
		if got := r.got(); len(got) != 0 {
			t.Fatalf("setBatch(%d): written while corked with %d frames: %v", c.inFlight, c.frames-1, got)
		}
		w.push([]byte{byte(c.frames - 1)}, nil, false)
		want = append(want, byte(c.frames-1))
		if got := r.got(); len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Fatalf("setBatch(%d): a corked batch of %d frames leaves at once, in one write: %v", c.inFlight, c.frames, got)
		}
		w.uncork()
		w.close("done")
	}
}

func TestASenderThatFillsASoonBatchWritesItItself(t *testing.T) {
	r := &recorder{}
	// The background flusher starts late: the hand-over is not begun.
	w := newWriterAlone(r, DefaultWriteQueue)
	var want []byte
	for i := range batchFrames - 1 {
		w.push([]byte{byte(i)}, nil, true)
		want = append(want, byte(i))
	}
	if got := r.got(); len(got) != 0 {
		t.Fatalf("frames pushed soon were written inline: %v", got)
	}
	w.push([]byte{batchFrames - 1}, nil, true)
	want = append(want, batchFrames-1)
	if got := r.got(); len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Fatalf("the sender that fills the batch writes it, in one write: %v", got)
	}
	// The kick left over from the hand-over taken back is ignored ...
	go w.background()
	defer w.close("done")
	w.flushed(time.Second)
	if got := r.got(); len(got) != 1 {
		t.Fatalf("a stale kick wrote: %v", got)
	}
	w.mu.Lock()
	flushing, handed := w.flushing, w.handed
	w.mu.Unlock()
	if flushing || handed != handNone {
		t.Fatalf("after the batch: flushing %v, handed %v", flushing, handed)
	}
	// ... and a frame pushed soon later is written by the background flusher.
	w.push([]byte{200}, nil, true)
	w.flushed(5 * time.Second)
	if got := r.got(); len(got) != 2 || !bytes.Equal(got[1], []byte{200}) {
		t.Fatalf("a frame pushed soon after: %v", got)
	}
}

// slow is a recorder whose writes take a while (a sleep before the bytes
// land), so that two flushers writing at once would reorder frames; it
// counts writes that overlapped.
type slow struct {
	recorder
	writing atomic.Int32
	overlap atomic.Int32
}

func (s *slow) TryWrite(bufs [][]byte) (int, error) {
	if s.writing.Add(1) > 1 {
		s.overlap.Add(1)
	}
	defer s.writing.Add(-1)
	time.Sleep(20 * time.Microsecond)
	return s.recorder.TryWrite(bufs)
}

func (s *slow) Write(bufs [][]byte) (int, error) { return s.TryWrite(bufs) }

func TestSoonFramesOfManySendersArriveOnceAndInOrder(t *testing.T) {
	const rounds, senders, each = 20, 6, 400
	for round := range rounds {
		s := &slow{}
		w := newWriter(s, DefaultWriteQueue)
		var wg sync.WaitGroup
		for g := range senders {
			wg.Go(func() {
				for i := range each {
					w.push([]byte{'<', byte(g), byte(i), byte(i >> 8)}, nil, true)
				}
			})
		}
		wg.Wait()
		w.flushed(10 * time.Second)
		w.mu.Lock()
		queued, flushing := w.queued, w.flushing
		w.mu.Unlock()
		if queued != 0 || flushing {
			t.Fatalf("round %d: stalled: %d bytes queued, flushing %v", round, queued, flushing)
		}
		w.close("done")
		out := bytes.Join(s.got(), nil)
		next := make([]int, senders)
		for len(out) > 0 {
			if len(out) < 4 || out[0] != '<' || int(out[1]) >= senders {
				t.Fatalf("round %d: a frame was cut at %d bytes from the end", round, len(out))
			}
			g, i := int(out[1]), int(out[2])|int(out[3])<<8
			if i != next[g] {
				t.Fatalf("round %d: sender %d's frame %d arrived after its frame %d (lost, repeated or reordered)", round, g, i, next[g]-1)
			}
			next[g]++
			out = out[4:]
		}
		for g, n := range next {
			if n != each {
				t.Fatalf("round %d: %d of sender %d's %d frames arrived", round, n, g, each)
			}
		}
		if n := s.overlap.Load(); n > 0 {
			t.Fatalf("round %d: two flushers wrote at once %d times", round, n)
		}
	}
}
