package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

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
