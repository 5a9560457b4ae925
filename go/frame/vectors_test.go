package frame

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The byte-level vectors of spec/vectors/ (PROTOCOL.md §12), every case
// reported by name. codecs.json is loaded by the hubwire package's tests,
// where the payload codecs live.

func loadVectors(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "spec", "vectors", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type frameCase struct {
	Name  string         `json:"name"`
	Hex   string         `json:"hex"`
	Frame map[string]any `json:"frame"`
}

// fromVector builds the Frame a vector's decoded fields describe.
func fromVector(t *testing.T, v map[string]any) Frame {
	t.Helper()
	num := func(k string) uint32 { f, _ := v[k].(float64); return uint32(f) }
	str := func(k string) string { s, _ := v[k].(string); return s }
	hx := func(k string) []byte { return unhex(t, str(k)) }
	code := func() Code {
		c, ok := CodeByName(str("code"))
		if !ok {
			t.Fatalf("unknown code %q", str("code"))
		}
		return c
	}
	codec := func() Codec {
		switch str("codec") {
		case "msgpack":
			return Msgpack
		case "json":
			return JSON
		}
		return Raw
	}
	var f Frame
	switch str("type") {
	case "hello":
		body, _ := json.Marshal(v["body"])
		h, err := ParseHello(body)
		if err != nil {
			t.Fatalf("vector HELLO body does not parse: %v", err)
		}
		f = Frame{Type: TypeHello, Hello: h}
	case "request":
		k, _ := KindByName(str("kind"))
		f = Frame{Type: TypeRequest, CallID: num("call_id"), Kind: k, Codec: codec(), TimeoutMs: num("timeout_ms"), Method: []byte(str("method")), Payload: hx("payload_hex")}
	case "response":
		f = Frame{Type: TypeResponse, CallID: num("call_id"), Codec: codec(), Code: code(), Message: []byte(str("message")), Payload: hx("payload_hex")}
	case "item":
		f = Frame{Type: TypeItem, CallID: num("call_id"), Codec: codec(), Payload: hx("payload_hex")}
	case "end":
		f = Frame{Type: TypeEnd, CallID: num("call_id")}
	case "cancel":
		f = Frame{Type: TypeCancel, CallID: num("call_id")}
	case "credit":
		f = Frame{Type: TypeCredit, CallID: num("call_id"), Credit: num("credit")}
	case "ping", "pong":
		f = Frame{Type: TypePing, Data: [8]byte(hx("data_hex"))}
		if str("type") == "pong" {
			f.Type = TypePong
		}
	case "goaway":
		f = Frame{Type: TypeGoaway, CallID: num("last_id"), Code: code(), Message: []byte(str("message"))}
	default:
		t.Fatalf("unknown frame type %q", str("type"))
	}
	return f
}

// equal compares frames field by field, treating nil and empty bytes alike.
func equal(a, b Frame) bool {
	norm := func(f *Frame) {
		for _, p := range []*[]byte{&f.Method, &f.Message, &f.Payload} {
			if len(*p) == 0 {
				*p = nil
			}
		}
	}
	norm(&a)
	norm(&b)
	return reflect.DeepEqual(a, b)
}

func TestFrameVectors(t *testing.T) {
	var file struct {
		Cases      []frameCase `json:"cases"`
		DecodeOnly []frameCase `json:"decode_only"`
	}
	loadVectors(t, "frames.json", &file)
	if len(file.Cases) < 30 {
		t.Fatalf("frames.json looks truncated: %d cases", len(file.Cases))
	}
	run := func(c frameCase, encode bool) {
		t.Run(c.Name, func(t *testing.T) {
			want := fromVector(t, c.Frame)
			raw := unhex(t, c.Hex)
			d := NewDecoder(DefaultMaxFrame)
			// A prefix asks for more bytes.
			for _, cut := range []int{0, 5, HeaderLen, len(raw) - 1} {
				if cut < 0 || cut >= len(raw) {
					continue
				}
				if _, n, err := d.Decode(raw[:cut]); n != 0 || err != nil {
					t.Fatalf("a prefix of %d bytes: n=%d err=%v, want a request for more", cut, n, err)
				}
			}
			got, n, err := d.Decode(raw)
			if err != nil || n != len(raw) {
				t.Fatalf("decode: n=%d of %d, err=%v", n, len(raw), err)
			}
			if !equal(got, want) {
				t.Fatalf("decode:\n got %+v\nwant %+v", got, want)
			}
			enc := want.Append(nil)
			if !encode {
				// Encoding gives the bytes with reserved flag bits cleared.
				exp := bytes.Clone(raw)
				exp[6] &= 3
				if exp[5] != byte(TypeRequest) {
					exp[6] = 0
				}
				raw = exp
			}
			if want.Type == TypeHello && !bytes.Equal(enc, raw) {
				// The canonical form is not required: compare as JSON values,
				// the header exact.
				var a, b any
				json.Unmarshal(enc[HeaderLen:], &a)
				json.Unmarshal(raw[HeaderLen:], &b)
				if !reflect.DeepEqual(a, b) || !bytes.Equal(enc[4:HeaderLen], raw[4:HeaderLen]) {
					t.Fatalf("encode hello:\n got %s\nwant %s", enc[HeaderLen:], raw[HeaderLen:])
				}
				return
			}
			if !bytes.Equal(enc, raw) {
				t.Fatalf("encode:\n got %x\nwant %x", enc, raw)
			}
		})
	}
	for _, c := range file.Cases {
		run(c, true)
	}
	for _, c := range file.DecodeOnly {
		run(c, false)
	}
}

func TestHandshakeVectors(t *testing.T) {
	var file struct {
		Cases []struct {
			Name     string          `json:"name"`
			BodyJSON string          `json:"body_json"`
			Valid    bool            `json:"valid"`
			Hello    json.RawMessage `json:"hello"`
			Error    string          `json:"error"`
		} `json:"cases"`
		Negotiation []struct {
			Name            string   `json:"name"`
			Ours            []uint32 `json:"ours"`
			Theirs          []uint32 `json:"theirs"`
			Result          uint32   `json:"result"`
			Error           string   `json:"error"`
			MessageContains string   `json:"message_contains"`
		} `json:"negotiation"`
	}
	loadVectors(t, "handshake.json", &file)
	if len(file.Cases) < 30 {
		t.Fatalf("handshake.json looks truncated: %d cases", len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			// Parsed alone, and wrapped in a HELLO frame.
			body := []byte(c.BodyJSON)
			framed := append(appendHeader(nil, TypeHello, 0, 0, 0, len(body)), body...)
			h, err := ParseHello(body)
			f, _, ferr := NewDecoder(DefaultMaxFrame).Decode(framed)
			if !c.Valid {
				if err == nil || ferr == nil {
					t.Fatalf("accepted an invalid HELLO (alone: %v, framed: %v)", err, ferr)
				}
				if err.Code.String() != c.Error || ferr.Code.String() != c.Error {
					t.Fatalf("code %s / %s, want %s", err.Code, ferr.Code, c.Error)
				}
				return
			}
			if err != nil || ferr != nil {
				t.Fatalf("refused a valid HELLO: %v / %v", err, ferr)
			}
			var got, want any
			json.Unmarshal(h.JSON(), &got)
			json.Unmarshal(c.Hello, &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("parsed:\n got %v\nwant %v", got, want)
			}
			var fromFrame any
			json.Unmarshal(f.Hello.JSON(), &fromFrame)
			if !reflect.DeepEqual(fromFrame, want) {
				t.Fatalf("framed: got %v", fromFrame)
			}
		})
	}
	for _, c := range file.Negotiation {
		t.Run("negotiation/"+c.Name, func(t *testing.T) {
			v, err := Negotiate(c.Ours, c.Theirs)
			if c.Error != "" {
				if err == nil || err.Code.String() != c.Error || !bytes.Contains([]byte(err.Message), []byte(c.MessageContains)) {
					t.Fatalf("got %d, %v; want %s containing %q", v, err, c.Error, c.MessageContains)
				}
				return
			}
			if err != nil || v != c.Result {
				t.Fatalf("got %d, %v; want %d", v, err, c.Result)
			}
		})
	}
}

func TestRejectVectors(t *testing.T) {
	var file struct {
		Cases []struct {
			Name            string `json:"name"`
			Hex             string `json:"hex"`
			MaxFrame        uint32 `json:"max_frame"`
			EOF             bool   `json:"eof"`
			Error           string `json:"error"`
			MessageContains string `json:"message_contains"`
		} `json:"cases"`
	}
	loadVectors(t, "reject.json", &file)
	if len(file.Cases) < 30 {
		t.Fatalf("reject.json looks truncated: %d cases", len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			max := c.MaxFrame
			if max == 0 {
				max = DefaultMaxFrame
			}
			d := NewDecoder(max)
			buf := unhex(t, c.Hex)
			var err *Error
			for {
				_, n, e := d.Decode(buf)
				if e != nil {
					err = e
					break
				}
				if n == 0 {
					if !c.EOF {
						t.Fatalf("the decoder asked for more bytes; it should have refused from %x", buf)
					}
					err = d.Finish(buf)
					break
				}
				buf = buf[n:]
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Code.String() != c.Error || !bytes.Contains([]byte(err.Message), []byte(c.MessageContains)) {
				t.Fatalf("got %v; want %s containing %q", err, c.Error, c.MessageContains)
			}
		})
	}
}

func TestCodesMatchCodesJSON(t *testing.T) {
	var file map[string]any
	b, err := os.ReadFile(filepath.Join("..", "..", "spec", "codes.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	codes, _ := file["codes"].([]any)
	if len(codes) != NumCodes {
		t.Fatalf("codes.json has %d codes, we have %d", len(codes), NumCodes)
	}
	for _, c := range codes {
		m := c.(map[string]any)
		v, name := Code(m["value"].(float64)), m["name"].(string)
		if v.String() != name {
			t.Errorf("code %d: %q here, %q in codes.json", v, v.String(), name)
		}
	}
}
