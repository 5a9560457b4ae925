package hubwire_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hubwire "hubwire.dev/go"
	"hubwire.dev/go/hubwiretest"
	"hubwire.dev/go/internal/behaviour"
	"hubwire.dev/go/transport"
)

// The test binary doubles as the behaviour provider's child process: run
// with HUBWIRE_BEHAVIOUR_CHILD=1 it serves its parent and exits.
func TestMain(m *testing.M) {
	if os.Getenv("HUBWIRE_BEHAVIOUR_CHILD") == "1" {
		fmt.Println("behaviour-provider starting")
		wait := hubwire.WaitEfficient
		if os.Getenv("HUBWIRE_WAIT") == "low-latency" {
			wait = hubwire.WaitLowLatency
		}
		if err := behaviour.Provider().ServeChild(behaviour.Options(wait)); err != nil {
			fmt.Fprintln(os.Stderr, "behaviour-provider:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// setup is one transport in one wait mode.
type setup struct {
	transport string // memory, unix, tcp, child
	wait      hubwire.WaitMode
}

func (s setup) String() string { return s.transport + "-" + s.wait.String() }

// setups: every transport, in both wait modes.
var setups = func() []setup {
	var out []setup
	for _, t := range []string{"memory", "unix", "tcp", "child"} {
		for _, w := range []hubwire.WaitMode{hubwire.WaitEfficient, hubwire.WaitLowLatency} {
			out = append(out, setup{t, w})
		}
	}
	return out
}()

type logLine struct{ stream, line string }

// harness is a client connected to the behaviour provider over one setup.
type harness struct {
	t      *testing.T
	setup  setup
	client *hubwire.Connection
	kill   func() // kills the provider's side abruptly
	mu     sync.Mutex
	logs   []logLine // what a child printed
}

var tokens atomic.Int64

// token is unique to this test process: in-process providers share one
// record of what they observed.
func (h *harness) token(name string) string {
	return fmt.Sprintf("%s-%d-%d", name, os.Getpid(), tokens.Add(1))
}

func (h *harness) lines() []logLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logLine(nil), h.logs...)
}

func newHarness(t *testing.T, s setup) *harness {
	t.Helper()
	h := &harness{t: t, setup: s}
	client := hubwire.ConnectionOptions{Name: "behaviour-client", Wait: s.wait}
	server := behaviour.Options(s.wait)
	server.Service = behaviour.Provider()
	switch s.transport {
	case "memory":
		conns := hubwiretest.PairWith(server.Service, client, server)
		h.client, h.kill = conns.Client, func() { conns.Server.Close() }
	case "unix", "tcp":
		var l transport.Listener
		var err error
		if s.transport == "unix" {
			l, err = transport.ListenUnix(filepath.Join(t.TempDir(), "p.sock"))
		} else {
			l, err = transport.ListenTCP("127.0.0.1:0")
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan *hubwire.Connection, 1)
		go func() {
			st, err := l.Accept()
			if err != nil {
				accepted <- nil
				return
			}
			c, _ := hubwire.Accept(st, server)
			accepted <- c
		}()
		if s.transport == "unix" {
			h.client, err = hubwire.DialUnix(l.Addr(), client)
		} else {
			h.client, err = hubwire.DialTCP(l.Addr(), client)
		}
		if err != nil {
			t.Fatal(err)
		}
		srv := <-accepted
		l.Close()
		h.kill = func() { srv.Close() }
		t.Cleanup(func() { srv.Close() })
	case "child":
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "HUBWIRE_BEHAVIOUR_CHILD=1", "HUBWIRE_WAIT="+s.wait.String())
		child, err := transport.Spawn(cmd, "behaviour", func(_, stream, line string) {
			h.mu.Lock()
			h.logs = append(h.logs, logLine{stream, line})
			h.mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		h.client, err = hubwire.Dial(child, client)
		if err != nil {
			t.Fatal(err)
		}
		h.kill = func() {
			child.Kill()
			child.Wait()
		}
		t.Cleanup(func() {
			child.Kill()
			child.Wait()
		})
	}
	t.Cleanup(func() { h.client.Close() })
	return h
}

// assertCancelObserved polls the provider until it reports that token's
// call saw its cancellation; fails after 5 s (a hang, not a timing).
func (h *harness) assertCancelObserved(token string) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		seen, err := hubwire.Call[*bool](context.Background(), h.client, "was_cancelled", token)
		if err != nil {
			h.t.Fatal(err)
		}
		if seen != nil && *seen {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the provider never observed the cancellation of %s (saw %v)", token, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func expectCode(t *testing.T, err error, code hubwire.Code) *hubwire.Error {
	t.Helper()
	e, ok := err.(*hubwire.Error)
	if !ok || e.Code != code {
		t.Fatalf("expected %s, got %v", code, err)
	}
	return e
}
