package hubwire

import (
	"hubwire.dev/go/frame"
	"hubwire.dev/go/internal/engine"
)

// Code is a status code of spec/errors.md; String gives its name.
type Code = frame.Code

// The status codes.
const (
	CodeOK                 = frame.OK
	CodeFailure            = frame.Failure
	CodeDefect             = frame.Defect
	CodeUnknownMethod      = frame.UnknownMethod
	CodeInvalidArgument    = frame.InvalidArgument
	CodeDeadlineExceeded   = frame.DeadlineExceeded
	CodeCancelled          = frame.Cancelled
	CodeUnavailable        = frame.Unavailable
	CodeResourceExhausted  = frame.ResourceExhausted
	CodeTooLarge           = frame.TooLarge
	CodeProtocolError      = frame.ProtocolError
	CodeUnsupportedVersion = frame.UnsupportedVersion
	CodeInternal           = frame.Internal
	CodeUnauthenticated    = frame.Unauthenticated
)

// Kind is the kind of a call; StreamsIn and StreamsOut say which way it
// streams.
type Kind = frame.Kind

// The call kinds.
const (
	KindUnary        = frame.Unary
	KindServerStream = frame.ServerStream
	KindClientStream = frame.ClientStream
	KindBidi         = frame.Bidi
)

// Codec is how a payload is encoded on the wire.
type Codec = frame.Codec

// The payload codecs.
const (
	CodecRaw     = frame.Raw
	CodecMsgpack = frame.Msgpack
	CodecJSON    = frame.JSON
)

// Payload is a payload as it travels: its codec and its bytes. As a call's
// input or output type it passes through untouched (for relays).
type Payload = engine.Payload

// MethodInfo describes a method a peer offers (its HELLO).
type MethodInfo = frame.MethodInfo

// Hello is a peer's HELLO: who it is, its limits, its methods.
type Hello = frame.Hello

// WaitMode is how a connection's reader waits for bytes.
type WaitMode = engine.WaitMode

// The wait modes. The zero value of ConnectionOptions.Wait reads
// HUBWIRE_WAIT (efficient, low-latency, low-latency:<µs>).
const (
	// WaitEfficient blocks at once: no CPU while waiting.
	WaitEfficient = engine.WaitEfficient
	// WaitLowLatency spins (yielding) for up to ConnectionOptions.Spin
	// (50 µs) after activity before it blocks; never on one CPU.
	WaitLowLatency = engine.WaitLowLatency
)
