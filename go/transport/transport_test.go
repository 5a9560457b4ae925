package transport

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"
)

// One behaviour for every transport: bytes arrive in order, TryRead does
// not wait, CloseWrite is an end of stream, Close ends a waiting Read.

func pairs(t *testing.T) map[string][2]Transport {
	a, b := Pair()
	out := map[string][2]Transport{"memory": {a, b}}
	for _, kind := range []string{"unix", "tcp"} {
		var l Listener
		var err error
		if kind == "unix" {
			l, err = ListenUnix(filepath.Join(t.TempDir(), "t.sock"))
		} else {
			l, err = ListenTCP("127.0.0.1:0")
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan Transport, 1)
		go func() {
			c, _ := l.Accept()
			accepted <- c
		}()
		var c Transport
		if kind == "unix" {
			c, err = DialUnix(l.Addr())
		} else {
			c, err = DialTCP(l.Addr())
		}
		if err != nil {
			t.Fatal(err)
		}
		out[kind] = [2]Transport{c, <-accepted}
		l.Close()
	}
	return out
}

func readN(t *testing.T, r Transport, n int) []byte {
	out := make([]byte, 0, n)
	buf := make([]byte, 4096)
	for len(out) < n {
		m, err := r.Read(buf)
		if err != nil {
			t.Fatalf("after %d of %d bytes: %v", len(out), n, err)
		}
		out = append(out, buf[:m]...)
	}
	return out
}

func TestEveryTransportMovesBytes(t *testing.T) {
	for name, p := range pairs(t) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			defer a.Close()
			defer b.Close()
			if _, err := b.TryRead(make([]byte, 8)); !errors.Is(err, ErrWouldBlock) {
				t.Fatalf("TryRead on nothing: %v", err)
			}
			big := bytes.Repeat([]byte("0123456789"), 100_000)
			go a.Write([][]byte{[]byte("head"), nil, big})
			if got := readN(t, b, 4+len(big)); !bytes.Equal(got[:4], []byte("head")) || !bytes.Equal(got[4:], big) {
				t.Fatal("bytes changed on the way")
			}
			n, err := a.TryWrite([][]byte{[]byte("x")})
			if n != 1 || err != nil {
				t.Fatalf("TryWrite: %d %v", n, err)
			}
			readN(t, b, 1)
			a.CloseWrite()
			if _, err := b.Read(make([]byte, 8)); err != io.EOF {
				t.Fatalf("after CloseWrite: %v, want io.EOF", err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := a.Read(make([]byte, 8))
				done <- err
			}()
			a.Close()
			if err := <-done; err == nil {
				t.Fatal("Read after Close returned no error")
			}
		})
	}
}
