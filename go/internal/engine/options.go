package engine

import (
	"os"
	"strconv"
	"strings"
	"time"

	"hubwire.dev/go/frame"
)

// Version is the SDK's version, sent in HELLO.
const Version = "0.1.0"

// DefaultWriteQueue is Options.WriteQueue by default: 4 MiB.
const DefaultWriteQueue = 4 << 20

// MinWriteQueue is the smallest Options.WriteQueue taken (as in the Rust runtime).
const MinWriteQueue = 64 << 10

// Options say how a connection presents itself, its limits, how it waits
// and what it serves. The zero value is usable: every zero field takes its
// default.
type Options struct {
	// Name is ours in the peer's logs and listings ("go" if empty).
	Name string
	// Wait is how the reader waits for bytes; the zero value reads
	// HUBWIRE_WAIT (efficient, low-latency, low-latency:<µs>), else efficient.
	Wait WaitMode
	// Spin is the longest one low-latency spin lasts (default 50 µs).
	Spin time.Duration
	// MaxFrame is the largest frame body we accept (default 16 MiB, at least 4096).
	MaxFrame uint32
	// Window is the credit we grant per stream we receive (default 64).
	Window uint32
	// MaxCalls is how many calls we serve at once before answering
	// resource_exhausted (default 4096). A call counts until its RESPONSE
	// is queued, so that is also how many answers may still queue for a
	// peer that does not read once WriteQueue is reached.
	MaxCalls uint32
	// HandshakeTimeout bounds the wait for the peer's HELLO (default 10 s).
	HandshakeTimeout time.Duration
	// WriteQueue is how many frame bytes may be queued for the peer (not
	// yet taken by its socket) before we stop reading its new calls and
	// PINGs and stream senders wait (default 4 MiB, at least 64 KiB): a
	// peer that sends but does not read is held back by its own full
	// socket instead of growing our queue. Frames that end or feed calls
	// already running (RESPONSE, ITEM, CREDIT, CANCEL, END) are still
	// read, so two peers streaming to each other never wait on one another.
	WriteQueue int
	// WriteStallTimeout is how long the queue may stay above WriteQueue
	// while a new call waits to be read before the connection is closed
	// with GOAWAY resource_exhausted (default 30 s).
	WriteStallTimeout time.Duration
	// Service serves the calls the peer makes; nil offers no methods.
	Service Service
	// Token, as the dialer: sent in our HELLO (spec/PROTOCOL.md §4.4).
	Token string
	// RequireToken, as the acceptor: the token dialers must send. Without
	// it (or with another) they get GOAWAY unauthenticated and never our
	// HELLO.
	RequireToken string
}

// withDefaults fills in every zero field.
func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "go"
	}
	if o.Wait == WaitFromEnv {
		o.Wait, o.Spin = waitFromEnv(o.Spin)
	}
	if o.Spin <= 0 {
		o.Spin = DefaultSpin
	}
	if o.MaxFrame == 0 {
		o.MaxFrame = frame.DefaultMaxFrame
	}
	o.MaxFrame = max(o.MaxFrame, frame.MinMaxFrame)
	if o.Window == 0 {
		o.Window = frame.DefaultWindow
	}
	if o.MaxCalls == 0 {
		o.MaxCalls = frame.DefaultMaxCalls
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.WriteQueue == 0 {
		o.WriteQueue = DefaultWriteQueue
	}
	o.WriteQueue = max(o.WriteQueue, MinWriteQueue)
	if o.WriteStallTimeout <= 0 {
		o.WriteStallTimeout = 30 * time.Second
	}
	return o
}

// waitFromEnv reads HUBWIRE_WAIT: "efficient", "low-latency" or
// "low-latency:<µs>"; anything else is efficient.
func waitFromEnv(spin time.Duration) (WaitMode, time.Duration) {
	v := os.Getenv("HUBWIRE_WAIT")
	switch {
	case v == "low-latency":
		return WaitLowLatency, spin
	case strings.HasPrefix(v, "low-latency:"):
		if us, err := strconv.Atoi(strings.TrimPrefix(v, "low-latency:")); err == nil && us > 0 {
			return WaitLowLatency, time.Duration(us) * time.Microsecond
		}
		return WaitLowLatency, spin
	}
	return WaitEfficient, spin
}

// hello is our HELLO; the service's methods are asked for once, here.
func (o *Options) hello(dialer bool) *frame.Hello {
	h := frame.NewHello(frame.PeerInfo{Name: o.Name, Lang: "go", Version: Version})
	h.MaxFrame, h.Window, h.MaxCalls = o.MaxFrame, o.Window, o.MaxCalls
	if dialer {
		h.Token = o.Token
	}
	if o.Service != nil {
		h.Methods = o.Service.Methods()
	}
	h.Fit()
	return h
}
