package hubwire_test

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hubwire "hubwire.dev/go"
	"hubwire.dev/go/frame"
	"hubwire.dev/go/internal/behaviour"
	"hubwire.dev/go/transport"
)

// Bad input against a live provider (spec/PROTOCOL.md §7.1): every
// must-reject vector of spec/vectors/reject.json is sent, after a valid
// handshake, on a raw socket to a provider that also serves a healthy
// client. Each must get GOAWAY with the vector's code and a closed
// connection; the healthy client must keep working.

func startProvider(t *testing.T, maxFrame uint32) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.sock")
	l, err := transport.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	opts := behaviour.Options(hubwire.WaitEfficient)
	opts.MaxFrame = maxFrame
	go behaviour.Provider().Serve(l, opts)
	return path
}

func helloBytes(versions ...uint32) []byte {
	h := frame.NewHello(frame.PeerInfo{Name: "raw-test", Lang: "test", Version: "0"})
	h.Versions = versions
	return (&frame.Frame{Type: frame.TypeHello, Hello: h}).Append(nil)
}

// rawExchange sends before, reads the peer's HELLO if handshake, sends
// bad (half-closing after it if eof), then reads frames until the end of
// the stream.
func rawExchange(t *testing.T, path string, before []byte, handshake bool, bad []byte, eof bool) []frame.Frame {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(before)
	dec := frame.NewDecoder(^uint32(0))
	var buf []byte
	var frames []frame.Frame
	chunk := make([]byte, 4096)
	next := func() bool {
		for {
			f, n, ferr := dec.Decode(buf)
			if ferr != nil {
				t.Fatalf("the provider sent an invalid frame: %v", ferr)
			}
			if n > 0 {
				f.Payload, f.Message = append([]byte(nil), f.Payload...), append([]byte(nil), f.Message...)
				buf = buf[n:]
				frames = append(frames, f)
				return true
			}
			m, err := c.Read(chunk)
			if err != nil {
				if err != io.EOF && !strings.Contains(err.Error(), "reset") {
					t.Fatalf("no end of stream: %v", err)
				}
				return false
			}
			buf = append(buf, chunk[:m]...)
		}
	}
	if handshake {
		if !next() || frames[0].Type != frame.TypeHello {
			t.Fatal("no HELLO from the provider")
		}
	}
	c.Write(bad) // the peer may close before taking all of it
	if eof {
		c.(*net.UnixConn).CloseWrite()
	}
	for next() {
	}
	return frames
}

func goaway(frames []frame.Frame) *frame.Frame {
	for i := range frames {
		if frames[i].Type == frame.TypeGoaway {
			return &frames[i]
		}
	}
	return nil
}

func TestEveryMustRejectVectorGetsGoawayAndSparesOtherConnections(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "spec", "vectors", "reject.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name     string `json:"name"`
			Hex      string `json:"hex"`
			MaxFrame uint32 `json:"max_frame"`
			EOF      bool   `json:"eof"`
			Error    string `json:"error"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil || len(file.Cases) < 30 {
		t.Fatalf("reject.json: %v, %d cases", err, len(file.Cases))
	}
	type live struct {
		path    string
		healthy *hubwire.Connection
	}
	providers := map[uint32]live{}
	for _, c := range file.Cases {
		max := c.MaxFrame
		if max == 0 {
			max = frame.DefaultMaxFrame
		}
		p, ok := providers[max]
		if !ok {
			p.path = startProvider(t, max)
			if p.healthy, err = hubwire.DialUnix(p.path); err != nil {
				t.Fatal(err)
			}
			defer p.healthy.Close()
			providers[max] = p
		}
		bad, _ := hex.DecodeString(c.Hex)
		frames := rawExchange(t, p.path, helloBytes(1), true, bad, c.EOF)
		if g := goaway(frames); g == nil || g.Code.String() != c.Error {
			t.Errorf("%s: expected GOAWAY %s and a close, got %v", c.Name, c.Error, g)
		}
		// The provider keeps serving its other connections.
		if v, err := hubwire.Call[int64](bg, p.healthy, "add", [2]int64{int64(len(c.Name)), 1}); err != nil || v != int64(len(c.Name))+1 {
			t.Fatalf("the healthy connection broke after %s: %v %v", c.Name, v, err)
		}
	}
}

func TestHandshakeFailuresGetGoaway(t *testing.T) {
	path := startProvider(t, frame.DefaultMaxFrame)
	healthy, err := hubwire.DialUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer healthy.Close()
	notJSON := helloBytes(1)
	notJSON[frame.HeaderLen] = '!'
	for _, c := range []struct {
		name  string
		first []byte
		want  frame.Code
	}{
		{"no common version", helloBytes(2, 3), frame.UnsupportedVersion},
		{"first frame is not HELLO", frame.AppendPing(nil, frame.TypePing, [8]byte{1}), frame.ProtocolError},
		{"HELLO is not JSON", notJSON, frame.ProtocolError},
		{"garbage instead of a frame", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), frame.UnsupportedVersion},
	} {
		g := goaway(rawExchange(t, path, c.first, false, nil, false))
		if g == nil || g.Code != c.want {
			t.Errorf("%s: expected GOAWAY %s, got %v", c.name, c.want, g)
			continue
		}
		if c.want == frame.UnsupportedVersion && strings.Contains(c.name, "version") &&
			!(strings.Contains(string(g.Message), "[1]") && strings.Contains(string(g.Message), "[2, 3]")) {
			t.Errorf("%s: the message should name both lists: %s", c.name, g.Message)
		}
		if v, err := hubwire.Call[int64](bg, healthy, "add", [2]int64{1, 2}); v != 3 || err != nil {
			t.Fatalf("the healthy connection broke: %v %v", v, err)
		}
	}
}

func TestAClientRefusedAtHandshakeGetsTheCode(t *testing.T) {
	// A client dialling a peer that speaks only version 2 gets
	// unsupported_version, not a hang or a generic error.
	path := filepath.Join(t.TempDir(), "v2.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write(helloBytes(2))
		io.Copy(io.Discard, c)
	}()
	_, err = hubwire.DialUnix(path)
	e := expectCode(t, err, hubwire.CodeUnsupportedVersion)
	if !strings.Contains(e.Message, "no common protocol version") {
		t.Fatal(e)
	}
}

// spec/PROTOCOL.md §4.1.2: the first frame is read with the limit
// max(max_frame, 1 MiB); after it, max_frame alone applies.
func TestAHelloMayExceedASmallMaxFrameUpToOneMiB(t *testing.T) {
	path := startProvider(t, frame.MinMaxFrame)
	h := frame.NewHello(frame.PeerInfo{Name: "big-hello", Lang: "test", Version: "0"})
	for i := range 1000 {
		h.Methods = append(h.Methods, frame.MethodInfo{Name: "method_" + strings.Repeat("x", i%50), Kind: frame.Unary,
			Input: map[string]any{"type": "object", "description": "padding so that the HELLO grows"}, Output: map[string]any{}})
	}
	big := (&frame.Frame{Type: frame.TypeHello, Hello: h}).Append(nil)
	if len(big) <= 64*1024 || len(big) > frame.HelloLimit {
		t.Fatalf("the HELLO is %d bytes", len(big))
	}
	ping := frame.AppendPing(nil, frame.TypePing, [8]byte{7, 7, 7, 7, 7, 7, 7, 7})
	frames := rawExchange(t, path, big, true, ping, true)
	pong := false
	for _, f := range frames {
		pong = pong || f.Type == frame.TypePong
	}
	if !pong || goaway(frames) != nil {
		t.Errorf("a large HELLO was refused: %+v", goaway(frames))
	}
	item := frame.AppendItemHead(nil, 1, frame.Raw, 5000) // the header alone: over max_frame now
	if g := goaway(rawExchange(t, path, big, true, item, false)); g == nil || g.Code != frame.TooLarge {
		t.Errorf("after the HELLO: %+v, want GOAWAY too_large", g)
	}
	header := helloBytes(1)[:12]
	header[0], header[1], header[2], header[3] = 1, 0, 0x10, 0 // 1 MiB + 1
	if g := goaway(rawExchange(t, path, header, false, nil, false)); g == nil || g.Code != frame.TooLarge {
		t.Errorf("a first frame over 1 MiB: %+v, want GOAWAY too_large", g)
	}
}
