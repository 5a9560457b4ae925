package frame

import "fmt"

// Code is a hubwire status code (spec/errors.md): one byte on the wire, in
// RESPONSE and GOAWAY frames. The value is the byte.
type Code uint8

// The status codes, in wire order. Values 14–255 are reserved; in protocol
// version 1 a RESPONSE or GOAWAY carrying one is a protocol error.
const (
	OK                 Code = 0  // the call succeeded
	Failure            Code = 1  // a typed error the method declares; the payload carries its value
	Defect             Code = 2  // a bug or crash in the handler (a panic, an undeclared error)
	UnknownMethod      Code = 3  // no method of that name on this connection
	InvalidArgument    Code = 4  // the input did not decode, wrong call kind or codec
	DeadlineExceeded   Code = 5  // the call's deadline passed
	Cancelled          Code = 6  // cancelled by the caller, or aborted by the callee
	Unavailable        Code = 7  // the peer is gone or going; retry calls it never saw
	ResourceExhausted  Code = 8  // a limit was hit: max_calls, flow-control credit
	TooLarge           Code = 9  // a frame or payload over the receiver's max_frame
	ProtocolError      Code = 10 // malformed or unexpected frame, bad handshake
	UnsupportedVersion Code = 11 // no common protocol version, or a frame of another version
	Internal           Code = 12 // the implementation failed on the caller's side
	Unauthenticated    Code = 13 // the peer did not prove who it is (token, uid, certificate)
)

// codeNames is spec/errors.md's name column, indexed by value.
var codeNames = [...]string{
	"ok", "failure", "defect", "unknown_method", "invalid_argument",
	"deadline_exceeded", "cancelled", "unavailable", "resource_exhausted",
	"too_large", "protocol_error", "unsupported_version", "internal",
	"unauthenticated",
}

// NumCodes is how many codes protocol version 1 defines (0 to NumCodes-1).
const NumCodes = len(codeNames)

// Valid reports whether c is a defined (not reserved) code.
func (c Code) Valid() bool { return int(c) < NumCodes }

// String returns the name used in APIs, logs, vectors and the conformance
// suite ("ok", "unknown_method", …); a reserved value prints as "code(N)".
func (c Code) String() string {
	if c.Valid() {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// CodeByName returns the code spelled name in spec/errors.md.
func CodeByName(name string) (Code, bool) {
	for i, n := range codeNames {
		if n == name {
			return Code(i), true
		}
	}
	return 0, false
}
