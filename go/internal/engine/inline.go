package engine

import (
	"sync"
	"time"
)

// Running a unary handler on the reader goroutine ("inline").
//
// Handing each call to a goroutine of its own costs a wake-up per call:
// the Go scheduler, making the handler's goroutine runnable while another
// processor idles, wakes a thread for it, and on a machine of two virtual
// CPUs that thread competes with the peer process. So when a unary REQUEST
// arrives alone — no other call served on the connection, no other frame
// behind it in the read — the reader runs its handler itself.
//
// A handler may block (sleep, wait for I/O, call back over the same
// connection), and while it does, nobody reads: a CANCEL for it, or the
// next call, would wait. A watchdog per connection, a timer that runs only
// while inline handlers do, checks every inlinePeriod: a handler still
// running after a whole period has its reader role taken over by a new
// goroutine, which goes on reading from where the first one was; the
// first finishes its call and exits. Frames behind a blocking inline
// handler therefore wait at most two periods.
const inlinePeriod = time.Millisecond

type inline struct {
	mu      sync.Mutex
	current *inlineRun  // the inline run of the goroutine reading now, if any
	seen    *inlineRun  // current at the watchdog's last look
	runs    uint64      // inline runs so far
	last    uint64      // runs at the watchdog's last look
	timer   *time.Timer // armed while inline runs happen
}

// inlineRun is one handler run inline; handedOff is set when the watchdog
// gives reading to another goroutine during it.
type inlineRun struct{ handedOff bool }

// runInline runs s's handler on the reader goroutine; true if reading was
// handed to another goroutine meanwhile.
func (c *Core) runInline(s *served) bool {
	c.writer.uncork() // the answer leaves at once, with what the reader queued
	run := &inlineRun{}
	c.il.mu.Lock()
	c.il.current = run
	c.il.runs++
	if c.il.timer == nil {
		c.il.timer = time.AfterFunc(inlinePeriod, c.watchdog)
	}
	c.il.mu.Unlock()
	c.run(s)
	c.il.mu.Lock()
	if c.il.current == run {
		c.il.current = nil
	}
	handedOff := run.handedOff
	c.il.mu.Unlock()
	if !handedOff {
		c.writer.cork()
	}
	return handedOff
}

// watchdog hands reading to a new goroutine if an inline handler has run
// for a whole period, and goes on ticking only while inline runs happen.
func (c *Core) watchdog() {
	c.il.mu.Lock()
	defer c.il.mu.Unlock()
	if run := c.il.current; run != nil && run == c.il.seen {
		run.handedOff = true
		c.il.current = nil
		go c.readLoop(newSpinner(c.wait, c.spin))
	}
	active := c.il.current != nil || c.il.runs != c.il.last
	c.il.seen, c.il.last = c.il.current, c.il.runs
	select {
	case <-c.dead:
		active = false
	default:
	}
	if active {
		c.il.timer.Reset(inlinePeriod)
	} else {
		c.il.timer = nil
	}
}
