// Command hubwire-testee is the Go testee of the conformance suite
// (conformance/README.md): it reads control commands as JSON lines on
// stdin, serves the conformance service or makes the calls it is told
// to, and reports events as JSON lines on stdout. Model:
// rust/hubwire-testee.
//
//	hubwire-conformance --lang go --testee go/bin/hubwire-testee
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	hubwire "hubwire.dev/go"
	"hubwire.dev/go/transport"
)

// events writes one JSON line per event; one lock, so lines never
// interleave.
type events struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (e *events) emit(v map[string]any) {
	b, err := json.Marshal(report(v))
	if err != nil {
		b, _ = json.Marshal(map[string]any{"event": "error", "code": "internal", "message": err.Error()})
	}
	e.mu.Lock()
	e.w.Write(append(b, '\n'))
	e.w.Flush()
	e.mu.Unlock()
}

// report makes a decoded value JSON-ready: byte strings as arrays of
// numbers (as JSON carries them, spec/PROTOCOL.md §6), map keys as strings.
func report(v any) any {
	switch x := v.(type) {
	case []byte:
		out := make([]int, len(x))
		for i, b := range x {
			out[i] = int(b)
		}
		return out
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = report(e)
		}
		return m
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = report(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = report(e)
		}
		return out
	}
	return v
}

// plain turns control JSON (decoded with UseNumber) into values that
// encode as the spec wants: integers as integers, other numbers as float64.
func plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = plain(e)
		}
	case []any:
		for i, e := range x {
			x[i] = plain(e)
		}
	}
	return v
}

func main() {
	ev := &events{w: bufio.NewWriter(os.Stdout)}
	var conn *hubwire.Connection
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		var raw map[string]any
		if err := d.Decode(&raw); err != nil {
			ev.emit(map[string]any{"event": "error", "code": "invalid_argument", "message": "not JSON: " + string(line)})
			continue
		}
		cmd := plain(raw).(map[string]any)
		switch cmd["op"] {
		case "hello":
			ev.emit(map[string]any{"event": "hello", "lang": "go", "version": "0.1.0",
				"roles": []string{"client", "provider"}, "transports": []string{"child", "unix", "tcp"}})
		case "serve":
			serve(ev, cmd)
		case "connect":
			c, err := connect(cmd)
			if err != nil {
				ev.emit(map[string]any{"event": "error", "code": hubwire.CodeOf(err).String(), "message": err.Error()})
				continue
			}
			conn = c
			ev.emit(map[string]any{"event": "connected"})
		case "ping":
			if conn == nil {
				ev.emit(map[string]any{"event": "result", "id": cmd["id"], "code": "unavailable", "message": "not connected"})
				continue
			}
			go ping(ev, conn, cmd)
		case "call":
			if conn == nil {
				ev.emit(map[string]any{"event": "result", "id": cmd["id"], "code": "unavailable", "message": "not connected"})
				continue
			}
			go func() { ev.emit(call(conn, cmd)) }()
		default:
			ev.emit(map[string]any{"event": "error", "code": "invalid_argument", "message": fmt.Sprintf("unknown op %v", cmd["op"])})
		}
	}
	if conn != nil {
		conn.Close()
	}
}

func serve(ev *events, cmd map[string]any) {
	provider := conformanceService(ev)
	address, _ := cmd["address"].(string)
	opts := hubwire.ConnectionOptions{Name: "conformance-testee"}
	opts.RequireToken, _ = cmd["token"].(string)
	var l transport.Listener
	var err error
	switch cmd["transport"] {
	case "unix":
		l, err = transport.ListenUnix(address)
	case "tcp":
		l, err = transport.ListenTCP(address)
	case "child":
		// The handshake needs the runner, which waits for "ready": answer first.
		t, err := transport.FromEnv()
		if err != nil {
			ev.emit(map[string]any{"event": "error", "code": "unavailable", "message": err.Error()})
			return
		}
		ev.emit(map[string]any{"event": "ready", "address": "child"})
		go provider.ServeTransport(t, opts)
		return
	default:
		err = fmt.Errorf("unsupported transport %v", cmd["transport"])
	}
	if err != nil {
		ev.emit(map[string]any{"event": "error", "code": "unavailable", "message": err.Error()})
		return
	}
	ev.emit(map[string]any{"event": "ready", "address": l.Addr()})
	go provider.Serve(l, opts)
}

func connect(cmd map[string]any) (*hubwire.Connection, error) {
	opts := hubwire.ConnectionOptions{Name: "conformance-testee"}
	opts.Token, _ = cmd["token"].(string)
	address, _ := cmd["address"].(string)
	switch cmd["transport"] {
	case "unix":
		return hubwire.DialUnix(address, opts)
	case "tcp":
		return hubwire.DialTCP(address, opts)
	case "child":
		// A child is the acceptor of its parent's socketpair (§10), even when it calls.
		t, err := transport.FromEnv()
		if err != nil {
			return nil, hubwire.Errorf(hubwire.CodeUnavailable, "%v", err)
		}
		return hubwire.Accept(t, opts)
	}
	return nil, hubwire.Errorf(hubwire.CodeUnavailable, "unsupported transport %v", cmd["transport"])
}
