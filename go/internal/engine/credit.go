package engine

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"hubwire.dev/go/frame"
)

// recvWindow is the credit this side granted for one stream it receives
// (spec/PROTOCOL.md §8). Pure accounting: the reader spends it
// (onItem), the consumer earns it back (consumed) and sends the CREDIT
// frame itself. Credit goes back in batches of half the window, so a
// stream costs one CREDIT frame per half window rather than per item.
type recvWindow struct {
	remaining atomic.Int64 // items the peer may still send
	consumed  atomic.Int64 // items taken since the last grant
	batch     int64
}

func newRecvWindow(window uint32) *recvWindow {
	w := &recvWindow{batch: max(int64(window)/2, 1)}
	w.remaining.Store(int64(window))
	return w
}

// onItem spends one credit; false if none was left (the peer overran).
func (w *recvWindow) onItem() bool {
	for {
		r := w.remaining.Load()
		if r <= 0 {
			return false
		}
		if w.remaining.CompareAndSwap(r, r-1) {
			return true
		}
	}
}

// consumedOne records one item taken by the application and returns the
// credit to grant now (0: not yet). The credit counts as remaining before
// this returns, so the reader never sees the peer spend credit it was
// granted but that this side has not counted.
func (w *recvWindow) consumedOne() uint32 {
	c := w.consumed.Add(1)
	if c < w.batch {
		return 0
	}
	w.consumed.Add(-c)
	w.remaining.Add(c)
	return uint32(c)
}

// sendCredit is the credit the peer granted us for one stream we send: a
// counting semaphore that can be closed (the call ended).
type sendCredit struct {
	mu     sync.Mutex
	n      uint64
	closed *Error
	wake   chan struct{} // closed and replaced when credit arrives or on close
}

func newSendCredit(window uint32) *sendCredit {
	return &sendCredit{n: uint64(window), wake: make(chan struct{})}
}

// add grants n more items.
func (s *sendCredit) add(n uint32) {
	s.mu.Lock()
	s.n = min(s.n+uint64(n), math.MaxUint32) // saturates at 2^32 - 1 (§8)
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// close ends the stream: waiting senders fail with why.
func (s *sendCredit) close(why *Error) {
	s.mu.Lock()
	if s.closed == nil {
		s.closed = why
		close(s.wake)
		s.wake = make(chan struct{})
	}
	s.mu.Unlock()
}

// isClosed reports whether the stream has ended for sending.
func (s *sendCredit) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed != nil
}

// acquire takes one credit, waiting for the peer to grant more. It fails
// when the stream ends or ctx is done (then with ctx's error, mapped).
func (s *sendCredit) acquire(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.closed != nil {
			s.mu.Unlock()
			return s.closed
		}
		if s.n > 0 {
			s.n--
			s.mu.Unlock()
			return nil
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctxError(ctx, "waiting for credit")
		}
	}
}

// ctxError maps a done context to the call's status.
func ctxError(ctx context.Context, while string) *Error {
	if context.Cause(ctx) == context.DeadlineExceeded || ctx.Err() == context.DeadlineExceeded {
		return Errorf(frame.DeadlineExceeded, "deadline exceeded %s", while)
	}
	if e, ok := context.Cause(ctx).(*Error); ok {
		return e
	}
	return Errorf(frame.Cancelled, "the call was cancelled (%s)", while)
}
