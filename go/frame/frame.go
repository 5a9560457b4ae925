// Package frame is the hubwire wire protocol, version 1, as a pure codec:
// bytes in, frames out, and frames in, bytes out. No I/O. spec/PROTOCOL.md
// is the normative text; this package is tested against spec/vectors/.
//
// Every frame is a 12-byte little-endian header and a body:
//
//	bytes 0..4   body_len  u32  bytes after the header
//	byte  4      version   u8   1
//	byte  5      type      u8   Type (HELLO 0x01 … GOAWAY 0x0A)
//	byte  6      flags     u8   REQUEST: bits 0-1 = Kind; other bits reserved
//	byte  7      codec     u8   Codec of the payload (REQUEST, RESPONSE, ITEM)
//	bytes 8..12  call_id   u32  0 for HELLO, PING, PONG; last id for GOAWAY
//
// The Append* functions write a header and a body's fixed fields but not
// the payload, so a caller can send a large payload as its own buffer (one
// writev, no copy).
package frame

import "encoding/binary"

// HeaderLen is the length of the fixed frame header.
const HeaderLen = 12

// Version is the protocol version this package speaks.
const Version = 1

// DefaultMaxFrame is the default max_frame: the largest body a peer
// accepts unless its HELLO says otherwise (16 MiB).
const DefaultMaxFrame = 16 << 20

// Type is the frame type byte (spec/PROTOCOL.md §2.1).
type Type uint8

// The frame types.
const (
	TypeHello    Type = 0x01 // handshake: JSON body, first frame each way
	TypeRequest  Type = 0x02 // starts a call
	TypeResponse Type = 0x03 // ends a call with a status
	TypeItem     Type = 0x04 // one stream element
	TypeEnd      Type = 0x05 // the caller has no more stream inputs
	TypeCancel   Type = 0x06 // the caller abandons a call
	TypeCredit   Type = 0x07 // flow-control credit
	TypePing     Type = 0x08 // liveness / round-trip probe
	TypePong     Type = 0x09 // answer to a PING
	TypeGoaway   Type = 0x0A // the sender is draining or closing
)

var typeNames = [...]string{"", "HELLO", "REQUEST", "RESPONSE", "ITEM", "END", "CANCEL", "CREDIT", "PING", "PONG", "GOAWAY"}

// Known reports whether t is a frame type of version 1.
func (t Type) Known() bool { return t >= TypeHello && t <= TypeGoaway }

// String returns the type's name in capitals, as the spec writes it.
func (t Type) String() string {
	if t.Known() {
		return typeNames[t]
	}
	return "type(0x" + hex2(uint8(t)) + ")"
}

// connectionLevel: call_id must be 0.
func (t Type) connectionLevel() bool { return t == TypeHello || t == TypePing || t == TypePong }

// callLevel: call_id must not be 0. GOAWAY is neither: its id is the last seen.
func (t Type) callLevel() bool { return !t.connectionLevel() && t != TypeGoaway }

// Codec says how a payload is encoded (spec/PROTOCOL.md §6).
type Codec uint8

// The payload codecs.
const (
	Raw     Codec = 0 // the bytes themselves
	Msgpack Codec = 1 // one MessagePack value; the default for structured data
	JSON    Codec = 2 // one UTF-8 JSON value
)

// Valid reports whether c is a codec of version 1.
func (c Codec) Valid() bool { return c <= JSON }

// String returns "raw", "msgpack" or "json".
func (c Codec) String() string {
	switch c {
	case Raw:
		return "raw"
	case Msgpack:
		return "msgpack"
	case JSON:
		return "json"
	}
	return "codec(" + hex2(uint8(c)) + ")"
}

// Kind is the kind of a call (spec/PROTOCOL.md §1), in REQUEST flags bits 0–1.
type Kind uint8

// The call kinds.
const (
	Unary        Kind = 0 // one input, one output
	ServerStream Kind = 1 // one input, a stream of outputs
	ClientStream Kind = 2 // a stream of inputs, one output
	Bidi         Kind = 3 // streams both ways
)

var kindNames = [...]string{"unary", "server_stream", "client_stream", "bidi"}

// String returns the name used in HELLO: "unary", "server_stream", …
func (k Kind) String() string { return kindNames[k&3] }

// KindByName returns the kind spelled name in HELLO.
func KindByName(name string) (Kind, bool) {
	for i, n := range kindNames {
		if n == name {
			return Kind(i), true
		}
	}
	return 0, false
}

// StreamsOut reports whether the callee answers with ITEMs.
func (k Kind) StreamsOut() bool { return k == ServerStream || k == Bidi }

// StreamsIn reports whether the caller sends ITEMs.
func (k Kind) StreamsIn() bool { return k == ClientStream || k == Bidi }

// Frame is one decoded frame. Only the fields of its Type are meaningful.
// Payload, Method and Message alias the buffer the frame was decoded from
// (no copy); a holder that keeps them past the next read must own that
// buffer.
type Frame struct {
	Type      Type
	CallID    uint32 // the call; GOAWAY: the last id seen
	Kind      Kind   // REQUEST
	Codec     Codec  // REQUEST, RESPONSE, ITEM
	TimeoutMs uint32 // REQUEST: deadline from receipt, 0 = none
	Method    []byte // REQUEST: 1–255 bytes of UTF-8
	Code      Code   // RESPONSE, GOAWAY
	Message   []byte // RESPONSE, GOAWAY: UTF-8 for humans
	Payload   []byte // REQUEST, RESPONSE, ITEM
	Credit    uint32 // CREDIT: ≥ 1
	Data      [8]byte
	Hello     *Hello // HELLO
}

// Append appends the whole frame to dst.
func (f *Frame) Append(dst []byte) []byte {
	switch f.Type {
	case TypeHello:
		body := f.Hello.JSON()
		dst = appendHeader(dst, TypeHello, 0, 0, 0, len(body))
		return append(dst, body...)
	case TypeRequest:
		dst = AppendRequestHead(dst, f.CallID, f.Kind, f.Codec, f.TimeoutMs, string(f.Method), len(f.Payload))
		return append(dst, f.Payload...)
	case TypeResponse:
		dst = AppendResponseHead(dst, f.CallID, f.Codec, f.Code, string(f.Message), len(f.Payload))
		return append(dst, f.Payload...)
	case TypeItem:
		dst = AppendItemHead(dst, f.CallID, f.Codec, len(f.Payload))
		return append(dst, f.Payload...)
	case TypeEnd, TypeCancel:
		return appendHeader(dst, f.Type, 0, 0, f.CallID, 0)
	case TypeCredit:
		return AppendCredit(dst, f.CallID, f.Credit)
	case TypePing, TypePong:
		dst = appendHeader(dst, f.Type, 0, 0, 0, 8)
		return append(dst, f.Data[:]...)
	case TypeGoaway:
		return AppendGoaway(dst, f.CallID, f.Code, string(f.Message))
	}
	panic("frame: Append of unknown type " + f.Type.String())
}

// RequestBodyLen is the body length of a REQUEST carrying method and
// payloadLen bytes.
func RequestBodyLen(method string, payloadLen int) int { return 5 + len(method) + payloadLen }

// ResponseBodyLen is the body length of a RESPONSE carrying message and
// payloadLen bytes.
func ResponseBodyLen(message string, payloadLen int) int {
	return 3 + len(ClipMessage(message)) + payloadLen
}

// AppendRequestHead writes a REQUEST header and its fixed fields
// (timeout_ms u32, mlen u8, method); the caller appends payloadLen payload
// bytes. method must be 1–255 bytes.
func AppendRequestHead(dst []byte, id uint32, kind Kind, codec Codec, timeoutMs uint32, method string, payloadLen int) []byte {
	dst = appendHeader(dst, TypeRequest, uint8(kind), codec, id, RequestBodyLen(method, payloadLen))
	dst = binary.LittleEndian.AppendUint32(dst, timeoutMs)
	dst = append(dst, uint8(len(method)))
	return append(dst, method...)
}

// AppendResponseHead writes a RESPONSE header and status (code u8,
// msg_len u16, message); the caller appends payloadLen payload bytes.
func AppendResponseHead(dst []byte, id uint32, codec Codec, code Code, message string, payloadLen int) []byte {
	message = ClipMessage(message)
	dst = appendHeader(dst, TypeResponse, 0, codec, id, 3+len(message)+payloadLen)
	return appendStatus(dst, code, message)
}

// AppendItemHead writes an ITEM header; the caller appends the payload.
func AppendItemHead(dst []byte, id uint32, codec Codec, payloadLen int) []byte {
	return appendHeader(dst, TypeItem, 0, codec, id, payloadLen)
}

// AppendCredit writes a whole CREDIT frame.
func AppendCredit(dst []byte, id uint32, credit uint32) []byte {
	dst = appendHeader(dst, TypeCredit, 0, 0, id, 4)
	return binary.LittleEndian.AppendUint32(dst, credit)
}

// AppendGoaway writes a whole GOAWAY frame.
func AppendGoaway(dst []byte, lastID uint32, code Code, message string) []byte {
	message = ClipMessage(message)
	dst = appendHeader(dst, TypeGoaway, 0, 0, lastID, 3+len(message))
	return appendStatus(dst, code, message)
}

// AppendSimple writes a whole END or CANCEL frame (empty body).
func AppendSimple(dst []byte, t Type, id uint32) []byte { return appendHeader(dst, t, 0, 0, id, 0) }

// AppendPing writes a whole PING (or PONG, with t = TypePong) frame.
func AppendPing(dst []byte, t Type, data [8]byte) []byte {
	dst = appendHeader(dst, t, 0, 0, 0, 8)
	return append(dst, data[:]...)
}

func appendHeader(dst []byte, t Type, flags uint8, codec Codec, id uint32, bodyLen int) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(bodyLen))
	dst = append(dst, Version, uint8(t), flags, uint8(codec))
	return binary.LittleEndian.AppendUint32(dst, id)
}

func appendStatus(dst []byte, code Code, message string) []byte {
	dst = append(dst, uint8(code))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(message)))
	return append(dst, message...)
}

// ClipMessage cuts a message to at most 65535 bytes (msg_len is a u16), on
// a UTF-8 character boundary.
func ClipMessage(m string) string {
	if len(m) <= 0xFFFF {
		return m
	}
	end := 0xFFFF
	for end > 0 && m[end]&0xC0 == 0x80 {
		end--
	}
	return m[:end]
}

const hexDigits = "0123456789abcdef"

func hex2(b uint8) string { return string([]byte{hexDigits[b>>4], hexDigits[b&15]}) }

// IDAfter reports whether call id id was started after last by the same
// peer, in the serial-number order of spec/PROTOCOL.md §3 (ids wrap after
// 0xFFFFFFFF): (id - last) mod 2^32 is in 1..2^31-1. last 0 means "none
// seen", so every id is after it (GOAWAY's call_id, §5.10).
func IDAfter(id, last uint32) bool {
	d := id - last
	return last == 0 || (d >= 1 && d < 1<<31)
}
