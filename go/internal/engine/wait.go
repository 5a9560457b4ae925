package engine

import (
	"runtime"
	"time"

	"hubwire.dev/go/transport"
)

// WaitMode is how a connection's reader waits for bytes.
//
// On the virtual machines we run on, a round trip in which the receiver
// sleeps in the kernel costs tens of microseconds, most of it waking an
// idle virtual CPU (20–25 µs a hop). A reader that keeps asking the socket
// for a few tens of microseconds first gets the answer without that wake.
type WaitMode uint8

const (
	// WaitFromEnv, the zero value, takes the mode from HUBWIRE_WAIT
	// (efficient, low-latency, low-latency:<µs>), else WaitEfficient.
	WaitFromEnv WaitMode = iota
	// WaitEfficient blocks in the runtime's poller at once: no CPU while
	// waiting.
	WaitEfficient
	// WaitLowLatency, after activity, tries non-blocking reads for up to
	// the spin budget (yielding the CPU to other goroutines between tries)
	// before it blocks. It never spins where the process may use only one
	// CPU, and backs off after spins that found nothing, so an idle
	// connection costs no CPU in either mode.
	WaitLowLatency
)

// String returns "efficient", "low-latency" or "from-env".
func (w WaitMode) String() string {
	switch w {
	case WaitEfficient:
		return "efficient"
	case WaitLowLatency:
		return "low-latency"
	}
	return "from-env"
}

// DefaultSpin is the low-latency spin budget.
const DefaultSpin = 50 * time.Microsecond

const (
	failsBeforeBackoff = 3  // failed spins in a row before backing off
	maxSkipShift       = 10 // the longest back-off: 1024 skipped waits
)

// spinner is the adaptive spin of one connection's reader.
type spinner struct {
	budget time.Duration // 0: never spin
	fails  uint32
	skip   uint32
}

// newSpinner spins only in low-latency mode with more than one CPU to run
// on (runtime.NumCPU honours the affinity mask; GOMAXPROCS may lower it).
func newSpinner(mode WaitMode, budget time.Duration) spinner {
	if mode != WaitLowLatency || runtime.NumCPU() < 2 || runtime.GOMAXPROCS(0) < 2 {
		return spinner{}
	}
	return spinner{budget: budget}
}

func (s *spinner) enabled() bool { return s.budget > 0 }

// spin tries t.TryRead until it yields bytes, an error other than
// ErrWouldBlock, or the budget is spent (ok false: block now). Between
// tries it yields the processor, so goroutines this reader woke (a
// caller, a handler) run rather than wait for the spin to end.
func (s *spinner) spin(t transport.Transport, p []byte) (n int, err error, ok bool) {
	if s.budget == 0 {
		return 0, nil, false
	}
	if s.skip > 0 {
		s.skip--
		return 0, nil, false
	}
	start := time.Now()
	for {
		n, err = t.TryRead(p)
		if err != transport.ErrWouldBlock {
			s.fails = 0
			return n, err, true
		}
		if time.Since(start) >= s.budget {
			break
		}
		runtime.Gosched()
	}
	s.fails++
	if s.fails >= failsBeforeBackoff {
		s.skip = 1 << min(s.fails-failsBeforeBackoff, maxSkipShift)
	}
	return 0, nil, false
}
