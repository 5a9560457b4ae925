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
// CPUs that thread competes with the peer process. So the reader runs a
// unary handler itself, unless that method has blocked before on this
// connection (then it gets a goroutine, as calls of the other kinds do).
// Answers of the handlers run inline for the frames of one read leave in
// one write (the writer stays corked until the read is dispatched).
//
// A handler may block (sleep, wait for I/O, call back over the same
// connection), and while it does, nobody reads: a CANCEL for it, or the
// next call, would wait. A watchdog per connection, a timer that runs only
// while inline handlers do, checks every inlinePeriod: a handler still
// running after a whole period has its reader role taken over by a new
// goroutine, which goes on reading from where the first one was; the
// first finishes its call and exits, and the method is marked slow for a
// while. Frames behind a blocking inline handler therefore wait at most two
// periods, once per method and connection and slowFor.
const inlinePeriod = time.Millisecond

type inline struct {
	mu      sync.Mutex
	current *inlineRun           // the inline run of the goroutine reading now, if any
	seen    *inlineRun           // current at the watchdog's last look
	runs    uint64               // inline runs so far
	last    uint64               // runs at the watchdog's last look
	timer   *time.Timer          // armed while inline runs happen
	slow    map[string]time.Time // methods whose handler blocked inline, and when
}

// slowFor is how long a method that blocked inline runs in goroutines
// before it is tried inline again: a handler may have been descheduled
// once (a busy machine, a GC pause) rather than block by nature.
const slowFor = time.Second

// inlineRun is one handler run inline; handedOff is set when the watchdog
// gives reading to another goroutine during it.
type inlineRun struct {
	method    string
	handedOff bool
}

// inlines reports whether a unary call of method may run on the reader.
func (c *Core) inlines(method string) bool {
	c.il.mu.Lock()
	defer c.il.mu.Unlock()
	since, slow := c.il.slow[method]
	if slow && time.Since(since) > slowFor {
		delete(c.il.slow, method)
		slow = false
	}
	return !slow
}

// runInline runs s's handler on the reader goroutine; true if reading was
// handed to another goroutine meanwhile.
func (c *Core) runInline(s *served, last bool) bool {
	if last {
		// Nothing behind it in this read: its answer leaves at once.
		c.writer.uncork()
	}
	run := &inlineRun{method: s.ctx.Method}
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
	if last && !handedOff {
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
		if c.il.slow == nil {
			c.il.slow = map[string]time.Time{}
		}
		if len(c.il.slow) < 1024 { // bounded: the peer names the methods
			c.il.slow[run.method] = time.Now()
		}
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
