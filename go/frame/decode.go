package frame

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Error is what the codec refuses bytes with: a status code (which the
// receiver puts in its GOAWAY) and a message saying what was wrong.
type Error struct {
	Code    Code
	Message string
}

// Error returns "code: message".
func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

func protocolErr(format string, a ...any) *Error {
	return &Error{Code: ProtocolError, Message: fmt.Sprintf(format, a...)}
}

// Decoder turns a byte stream into frames (spec/PROTOCOL.md §2.2). It holds
// only the limits; the caller owns the buffer. The zero value is not
// usable: use NewDecoder.
type Decoder struct {
	maxFrame uint32
	version  uint8
}

// NewDecoder returns a decoder that refuses bodies over maxFrame bytes and
// expects version 1 until SetVersion.
func NewDecoder(maxFrame uint32) *Decoder { return &Decoder{maxFrame: maxFrame, version: Version} }

// MaxFrame is the decoder's limit on body_len.
func (d *Decoder) MaxFrame() uint32 { return d.maxFrame }

// SetVersion sets the version byte that frames after the handshake must
// carry. HELLO frames always carry version 1.
func (d *Decoder) SetVersion(v uint8) { d.version = v }

// SetMaxFrame changes the limit on body_len: the handshake reads the HELLO
// with a larger one (spec/PROTOCOL.md §4.1.2), then sets the connection's.
func (d *Decoder) SetMaxFrame(n uint32) { d.maxFrame = n }

// Check is the cheap completeness check: it looks at the 12-byte header
// alone. It returns 0 if buf does not hold a whole header yet, otherwise
// the whole frame's length (which may be more than buf holds), or the
// error the header alone proves — a wrong version, a body over max_frame,
// an unknown type or codec, a misplaced call id — before the body arrives,
// so an oversized frame costs no memory. The checks run in the spec's
// order, so a given bad input always gives the same code.
func (d *Decoder) Check(buf []byte) (int, *Error) {
	if len(buf) < HeaderLen {
		return 0, nil
	}
	bodyLen := binary.LittleEndian.Uint32(buf[0:4])
	version, t, codec := buf[4], Type(buf[5]), Codec(buf[7])
	id := binary.LittleEndian.Uint32(buf[8:12])
	expected := d.version
	if t == TypeHello {
		expected = Version
	}
	if version != expected {
		return 0, &Error{UnsupportedVersion, fmt.Sprintf("frame version %d, expected %d", version, expected)}
	}
	if bodyLen > d.maxFrame {
		return 0, &Error{TooLarge, fmt.Sprintf("frame body of %d bytes exceeds the limit of %d bytes (max_frame)", bodyLen, d.maxFrame)}
	}
	if !t.Known() {
		return 0, protocolErr("unknown frame type 0x%02x", uint8(t))
	}
	if !codec.Valid() {
		return 0, protocolErr("unknown codec %d", uint8(codec))
	}
	if t.connectionLevel() && id != 0 {
		return 0, protocolErr("%s frame with call id %d, must be 0", t, id)
	}
	if t.callLevel() && id == 0 {
		return 0, protocolErr("%s frame with call id 0", t)
	}
	return HeaderLen + int(bodyLen), nil
}

// Decode parses one complete frame from the front of buf. It returns the
// frame and how many bytes it took, or n = 0 when more bytes are needed.
// The frame's byte fields alias buf.
func (d *Decoder) Decode(buf []byte) (f Frame, n int, err *Error) {
	n, err = d.Check(buf)
	if err != nil || n == 0 || len(buf) < n {
		return f, 0, err
	}
	err = parseBody(&f, buf[:HeaderLen], buf[HeaderLen:n])
	if err != nil {
		return f, 0, err
	}
	return f, n, nil
}

// Finish is called at end of stream with what is left unread: nil if
// nothing, else the error for a truncated frame (after the header checks,
// which still run first).
func (d *Decoder) Finish(rest []byte) *Error {
	if len(rest) == 0 {
		return nil
	}
	n, err := d.Check(rest)
	if err != nil {
		return err
	}
	if n == 0 {
		return protocolErr("truncated frame header: stream ended after %d of %d bytes", len(rest), HeaderLen)
	}
	return protocolErr("truncated frame body: stream ended after %d of %d bytes", len(rest), n)
}

func parseBody(f *Frame, h, body []byte) *Error {
	// Check has validated type, codec and call id.
	f.Type, f.Codec = Type(h[5]), Codec(h[7])
	f.CallID = binary.LittleEndian.Uint32(h[8:12])
	exact := func(n int) *Error {
		if len(body) != n {
			return protocolErr("%s body must be %d bytes, got %d", f.Type, n, len(body))
		}
		return nil
	}
	switch f.Type {
	case TypeHello:
		hello, err := ParseHello(body)
		if err != nil {
			return err
		}
		f.Hello = hello
	case TypeRequest:
		if len(body) < 5 {
			return protocolErr("REQUEST body of %d bytes is shorter than 5", len(body))
		}
		f.TimeoutMs = binary.LittleEndian.Uint32(body[0:4])
		mlen := int(body[4])
		body = body[5:]
		if mlen == 0 {
			return protocolErr("REQUEST with an empty method name")
		}
		if mlen > len(body) {
			return protocolErr("REQUEST method length %d exceeds the %d bytes left in the body", mlen, len(body))
		}
		f.Method = body[:mlen:mlen]
		if !utf8.Valid(f.Method) {
			return protocolErr("method name is not valid UTF-8")
		}
		f.Kind = Kind(h[6] & 3)
		f.Payload = body[mlen:]
		if f.Kind.StreamsIn() && len(f.Payload) > 0 {
			return protocolErr("%s REQUEST must have an empty payload, got %d bytes", f.Kind, len(f.Payload))
		}
	case TypeResponse, TypeGoaway:
		if len(body) < 3 {
			return protocolErr("%s body of %d bytes is shorter than 3", f.Type, len(body))
		}
		f.Code = Code(body[0])
		if !f.Code.Valid() {
			return protocolErr("%s with reserved status code %d", f.Type, body[0])
		}
		mlen := int(binary.LittleEndian.Uint16(body[1:3]))
		body = body[3:]
		if mlen > len(body) {
			return protocolErr("%s message length %d exceeds the %d bytes left in the body", f.Type, mlen, len(body))
		}
		f.Message = body[:mlen:mlen]
		if !utf8.Valid(f.Message) {
			return protocolErr("message is not valid UTF-8")
		}
		f.Payload = body[mlen:]
		if f.Type == TypeGoaway {
			f.Codec = 0
			if len(f.Payload) > 0 {
				return protocolErr("GOAWAY has %d bytes after its message", len(f.Payload))
			}
			f.Payload = nil
		}
	case TypeItem:
		f.Payload = body
	case TypeEnd, TypeCancel:
		return exact(0)
	case TypeCredit:
		if err := exact(4); err != nil {
			return err
		}
		f.Credit = binary.LittleEndian.Uint32(body)
		if f.Credit == 0 {
			return protocolErr("CREDIT of 0")
		}
	case TypePing, TypePong:
		if err := exact(8); err != nil {
			return err
		}
		copy(f.Data[:], body)
	}
	return nil
}
