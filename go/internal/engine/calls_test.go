package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"hubwire.dev/go/frame"
	"hubwire.dev/go/transport"
)

// memoryPair opens a dialer connected in memory to an acceptor serving
// service; both are closed when the test ends.
func memoryPair(t *testing.T, service Service) (dialer, acceptor *Core) {
	t.Helper()
	a, b := transport.Pair()
	accepted := make(chan *Core, 1)
	go func() {
		c, err := Open(b, Options{Service: service}, false)
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	d, err := Open(a, Options{}, true)
	if err != nil {
		t.Fatal(err)
	}
	acc := <-accepted
	if acc == nil {
		t.FailNow()
	}
	t.Cleanup(func() { d.Close(); acc.Close() })
	return d, acc
}

// A unary call whose REQUEST cannot be queued (an earlier write failed
// before the reader saw the peer go) ends the connection, and that end
// finishes every call in the table, this one included: its outcome lands
// on the call's done channel. Its state used to go back to unaryPool with
// that outcome inside, and the next unary call, on whatever connection,
// took it for its own answer: the behaviour suite saw "write on a closed
// memory transport" and "connection closed locally" on live connections.
func TestAFailedRequestLeavesNoAnswerForAnotherCall(t *testing.T) {
	ctx := context.Background()
	healthy, _ := memoryPair(t, &echo{})
	for i := range 20 {
		broken, _ := memoryPair(t, &echo{})
		// What flushInline does when a write fails.
		broken.writer.close("write failed: broken pipe (test)")
		_, err := broken.Unary(ctx, "echo", Payload{Codec: frame.Raw, Bytes: []byte("lost")})
		if e := (*Error)(nil); !errors.As(err, &e) || e.Code != frame.Unavailable {
			t.Fatalf("a call on a connection that cannot write: %v, want unavailable", err)
		}
		in := []byte(fmt.Sprint("call ", i))
		out, err := healthy.Unary(ctx, "echo", Payload{Codec: frame.Raw, Bytes: in})
		if err != nil || !bytes.Equal(out.Bytes, in) {
			t.Fatalf("round %d: a call on a live connection got %q, %v (another connection's outcome)", i, out.Bytes, err)
		}
	}
}

// A served call that has left the table but whose RESPONSE is not queued
// yet keeps a drain waiting: Drain used to see the table empty, flush an
// empty queue and close, and the answer was dropped ("connection closed")
// though the handler had finished. Deterministic: the hook holds the call
// in that gap while Drain runs.
func TestDrainWaitsForAnAnswerOnItsWayToTheQueue(t *testing.T) {
	reached, release := make(chan struct{}), make(chan struct{})
	testHookBeforeAnswer = func() {
		close(reached)
		<-release
	}
	defer func() { testHookBeforeAnswer = nil }()
	dialer, acceptor := memoryPair(t, &echo{})
	type result struct {
		out Payload
		err error
	}
	answered := make(chan result, 1)
	go func() {
		out, err := dialer.Unary(context.Background(), "echo", Payload{Codec: frame.Raw, Bytes: []byte("kept")})
		answered <- result{out, err}
	}()
	<-reached
	drained := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		acceptor.Drain(ctx)
		close(drained)
	}()
	// Without the fix Drain is done well within this; with it, it waits.
	select {
	case <-drained:
		t.Fatal("Drain ended while a finished call's RESPONSE was still to be queued")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	r := <-answered
	if r.err != nil || string(r.out.Bytes) != "kept" {
		t.Fatalf("the call drained away: %q, %v; want its answer", r.out.Bytes, r.err)
	}
	<-drained
}
