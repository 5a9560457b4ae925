package hubwire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hubwire "hubwire.dev/go"
	"hubwire.dev/go/frame"
	"hubwire.dev/go/internal/behaviour"
)

// The shared behaviour suite, the Go twin of
// rust/hubwire-tests/tests/behaviour.rs: every case runs on every setup
// (memory, Unix, TCP, child process, each in both wait modes) and sees
// only a harness whose client is connected to the behaviour provider.

var bg = context.Background()

var cases = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"unary_raw", unaryRaw},
	{"unary_typed", unaryTyped},
	{"typed_failure", typedFailure},
	{"defect_panic", defectPanic},
	{"unknown_method", unknownMethod},
	{"invalid_argument", invalidArgument},
	{"response_type_mismatch", responseTypeMismatch},
	{"server_stream", serverStream},
	{"server_stream_error", serverStreamError},
	{"client_stream", clientStream},
	{"client_stream_early_answer", clientStreamEarlyAnswer},
	{"bidi", bidi},
	{"cancel_unary_observed", cancelUnaryObserved},
	{"cancel_stream_observed", cancelStreamObserved},
	{"deadline_exceeded", deadlineExceeded},
	{"deadline_exceeded_mid_stream", deadlineExceededMidStream},
	{"flow_control_bounded", flowControlBounded},
	{"flow_control_bounded_upstream", flowControlBoundedUpstream},
	{"concurrent_1000", concurrent1000},
	{"too_large", tooLarge},
	{"ping_and_identity", pingAndIdentity},
	{"peer_crash_fails_in_flight", peerCrashFailsInFlight},
	{"stray_output_is_logged", strayOutputIsLogged},
}

func TestBehaviour(t *testing.T) {
	for _, s := range setups {
		t.Run(s.String(), func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					h := newHarness(t, s)
					done := make(chan struct{})
					go func() {
						defer close(done)
						c.run(t, h)
					}()
					select {
					case <-done:
					case <-time.After(60 * time.Second):
						panic("case " + c.name + " on " + s.String() + " hung")
					}
				})
			}
		})
	}
}

func unaryRaw(t *testing.T, h *harness) {
	for _, in := range [][]byte{[]byte("hello"), {}} {
		out, err := h.client.CallRaw(bg, "echo", in)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("echo %q: %q, %v", in, out, err)
		}
	}
	big := make([]byte, 1_000_000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	out, err := h.client.CallRaw(bg, "echo", big)
	if err != nil || !bytes.Equal(out, big) {
		t.Fatalf("echo of 1 MB: %d bytes, %v", len(out), err)
	}
}

func unaryTyped(t *testing.T, h *harness) {
	if v, err := hubwire.Call[int64](bg, h.client, "add", [2]int64{2, 40}); v != 42 || err != nil {
		t.Fatalf("add: %v %v", v, err)
	}
	if v, err := hubwire.Call[int64](bg, h.client, "add", [2]int64{-5, 3}, hubwire.WithCodec(hubwire.CodecJSON)); v != -2 || err != nil {
		t.Fatalf("add over json: %v %v", v, err)
	}
	if v, err := hubwire.Call[float64](bg, h.client, "divide", [2]float64{1, 4}); v != 0.25 || err != nil {
		t.Fatalf("divide: %v %v", v, err)
	}
}

func typedFailure(t *testing.T, h *harness) {
	for _, codec := range []hubwire.Codec{hubwire.CodecMsgpack, hubwire.CodecJSON} {
		_, err := hubwire.Call[float64](bg, h.client, "divide", [2]float64{1, 0}, hubwire.WithCodec(codec))
		expectCode(t, err, hubwire.CodeFailure)
		var f *hubwire.Failure[behaviour.DivError]
		if !errors.As(err, &f) || f.Value.Kind != "division_by_zero" {
			t.Fatalf("%s: failure value not decoded: %v", codec, err)
		}
	}
}

func defectPanic(t *testing.T, h *harness) {
	_, err := hubwire.Call[any](bg, h.client, "panic", "boom 42")
	e := expectCode(t, err, hubwire.CodeDefect)
	if !strings.Contains(e.Message, "boom 42") {
		t.Fatal(e)
	}
	// Only that call failed: the connection and provider go on.
	if v, err := hubwire.Call[int64](bg, h.client, "add", [2]int64{1, 1}); v != 2 || err != nil {
		t.Fatalf("after a panic: %v %v", v, err)
	}
}

func unknownMethod(t *testing.T, h *harness) {
	_, err := h.client.CallRaw(bg, "no_such_method", nil)
	if e := expectCode(t, err, hubwire.CodeUnknownMethod); !strings.Contains(e.Message, "no_such_method") {
		t.Fatal(e)
	}
}

func invalidArgument(t *testing.T, h *harness) {
	_, err := hubwire.Call[int64](bg, h.client, "add", "not a pair")
	expectCode(t, err, hubwire.CodeInvalidArgument)
	// A structured method given raw bytes.
	_, err = h.client.CallRaw(bg, "add", []byte{0x92, 0x01, 0x02})
	expectCode(t, err, hubwire.CodeInvalidArgument)
	// The wrong call kind.
	_, err = hubwire.Call[int64](bg, h.client, "count", 3)
	if e := expectCode(t, err, hubwire.CodeInvalidArgument); !strings.Contains(e.Message, "server_stream") {
		t.Fatal(e)
	}
}

func responseTypeMismatch(t *testing.T, h *harness) {
	// The caller expects a string, the method returns a number.
	_, err := hubwire.Call[string](bg, h.client, "add", [2]int64{1, 2})
	expectCode(t, err, hubwire.CodeInternal)
}

func serverStream(t *testing.T, h *harness) {
	items, err := hubwire.ServerStream[int64](bg, h.client, "count", 100)
	if err != nil {
		t.Fatal(err)
	}
	got, err := items.Collect()
	if err != nil || len(got) != 100 || got[99] != 99 {
		t.Fatalf("count 100: %d items, %v", len(got), err)
	}
	items, _ = hubwire.ServerStream[int64](bg, h.client, "count", 0)
	if got, err := items.Collect(); len(got) != 0 || err != nil {
		t.Fatalf("count 0: %v %v", got, err)
	}
}

func serverStreamError(t *testing.T, h *harness) {
	items, err := hubwire.ServerStream[int64](bg, h.client, "then_fail", 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(2) {
		if v, err := items.Recv(); v != i || err != nil {
			t.Fatalf("item %d: %v %v", i, v, err)
		}
	}
	_, err = items.Recv()
	expectCode(t, err, hubwire.CodeFailure)
	var f *hubwire.Failure[behaviour.DivError]
	if !errors.As(err, &f) || f.Value.Kind != "stream_failed" {
		t.Fatal(err)
	}
}

func clientStream(t *testing.T, h *harness) {
	// More items than the provider's window: needs CREDIT to finish.
	call, err := hubwire.ClientStream[int64, int64](bg, h.client, "sum")
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 1000; i++ {
		if err := call.Send(i); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := call.Finish(); v != 500_500 || err != nil {
		t.Fatalf("sum: %v %v", v, err)
	}
	call, _ = hubwire.ClientStream[int64, int64](bg, h.client, "sum")
	if v, err := call.Finish(); v != 0 || err != nil {
		t.Fatalf("empty sum: %v %v", v, err)
	}
}

func clientStreamEarlyAnswer(t *testing.T, h *harness) {
	call, err := hubwire.ClientStream[int64, int64](bg, h.client, "first_only")
	if err != nil {
		t.Fatal(err)
	}
	call.Send(7)
	if v, err := call.Finish(); v != 7 || err != nil {
		t.Fatalf("first_only: %v %v", v, err)
	}
}

func bidi(t *testing.T, h *harness) {
	sink, items, err := hubwire.Bidi[string, string](bg, h.client, "upper")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		sink.Send(fmt.Sprintf("line %d", i))
		if v, err := items.Recv(); v != fmt.Sprintf("LINE %d", i) || err != nil {
			t.Fatalf("item %d: %q %v", i, v, err)
		}
	}
	// A burst bigger than both windows, read afterwards.
	sent := make(chan error, 1)
	go func() {
		for i := range 500 {
			if err := sink.Send(fmt.Sprintf("b%d", i)); err != nil {
				sent <- err
				return
			}
		}
		sent <- sink.CloseSend()
	}()
	for i := range 500 {
		if v, err := items.Recv(); v != fmt.Sprintf("B%d", i) || err != nil {
			t.Fatalf("burst item %d: %q %v", i, v, err)
		}
	}
	if _, err := items.Recv(); err != io.EOF {
		t.Fatalf("after the burst: %v, want io.EOF", err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

func cancelUnaryObserved(t *testing.T, h *harness) {
	token := h.token("cancel-unary")
	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := hubwire.Call[any](ctx, h.client, "sleep", behaviour.Tagged{Token: token, N: 60_000})
	expectCode(t, err, hubwire.CodeCancelled)
	h.assertCancelObserved(token)
}

func cancelStreamObserved(t *testing.T, h *harness) {
	token := h.token("cancel-stream")
	items, err := hubwire.ServerStream[int64](bg, h.client, "firehose", behaviour.Tagged{Token: token, N: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		if v, err := items.Recv(); v != i || err != nil {
			t.Fatalf("item %d: %v %v", i, v, err)
		}
	}
	items.Close()
	h.assertCancelObserved(token)
}

func deadlineExceeded(t *testing.T, h *harness) {
	token := h.token("deadline-unary")
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	_, err := hubwire.Call[any](ctx, h.client, "sleep", behaviour.Tagged{Token: token, N: 60_000})
	expectCode(t, err, hubwire.CodeDeadlineExceeded)
	h.assertCancelObserved(token)
	// A call that fits its deadline succeeds.
	ctx, cancel = context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if _, err := hubwire.Call[any](ctx, h.client, "sleep", behaviour.Tagged{Token: h.token("deadline-ok"), N: 1}); err != nil {
		t.Fatal(err)
	}
}

func deadlineExceededMidStream(t *testing.T, h *harness) {
	token := h.token("deadline-stream")
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	items, err := hubwire.ServerStream[int64](ctx, h.client, "slow_stream", behaviour.Tagged{Token: token, N: 20})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, err = range items.All() {
		if err != nil {
			break
		}
		got++
	}
	expectCode(t, err, hubwire.CodeDeadlineExceeded)
	if got < 1 {
		t.Fatalf("expected items before the deadline, got %d", got)
	}
	h.assertCancelObserved(token)
}

func progress(t *testing.T, h *harness, token string) int64 {
	n, err := hubwire.Call[int64](bg, h.client, "progress", token)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func flowControlBounded(t *testing.T, h *harness) {
	// The client grants 64 items (its default window); a provider that
	// could send 100 000 must stop at the window while we do not read.
	const window = frame.DefaultWindow
	token := h.token("flow")
	items, err := hubwire.ServerStream[int64](bg, h.client, "firehose", behaviour.Tagged{Token: token, N: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	defer items.Close()
	if v, err := items.Recv(); v != 0 || err != nil {
		t.Fatal(v, err)
	}
	// Wait until the producer has used its credit, then give it time to
	// run ahead if it could.
	for deadline := time.Now().Add(5 * time.Second); progress(t, h, token) < window/2; {
		if time.Now().After(deadline) {
			t.Fatalf("the producer never used its credit: sent %d", progress(t, h, token))
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if sent := progress(t, h, token); sent > window+1 {
		t.Fatalf("the producer ran ahead of the consumer: sent %d with a window of %d", sent, window)
	}
	// Reading on lets it go on.
	for i := int64(1); i < 3*window; i++ {
		if v, err := items.Recv(); v != i || err != nil {
			t.Fatalf("item %d: %v %v", i, v, err)
		}
	}
	if sent := progress(t, h, token); sent < 3*window-1 {
		t.Fatalf("credit was not returned: sent %d", sent)
	}
}

func flowControlBoundedUpstream(t *testing.T, h *harness) {
	// The other direction: a handler that does not read grants no credit
	// beyond its window, so the caller's sends stop there.
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	call, err := hubwire.ClientStream[int64, int64](ctx, h.client, "stall")
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	go func() {
		for i := 0; i < 10*behaviour.Window; i++ {
			if call.Send(1) != nil {
				return
			}
			sent.Add(1)
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); sent.Load() < behaviour.Window; {
		if time.Now().After(deadline) {
			t.Fatalf("the window was not used: sent %d", sent.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := sent.Load(); n != behaviour.Window {
		t.Fatalf("the caller must stop at the callee's window of %d: sent %d", behaviour.Window, n)
	}
}

func concurrent1000(t *testing.T, h *harness) {
	// 1000 calls in flight on one connection, answered out of order.
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for i := range int64(1000) {
		wg.Go(func() {
			v, err := hubwire.Call[int64](bg, h.client, "delay_echo", [2]int64{i, (i * 37) % 50})
			if err != nil || v != i {
				errs <- fmt.Errorf("call %d: %v %v", i, v, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func tooLarge(t *testing.T, h *harness) {
	big := make([]byte, behaviour.MaxFrame)
	_, err := h.client.CallRaw(bg, "echo", big)
	if e := expectCode(t, err, hubwire.CodeTooLarge); !strings.Contains(e.Message, "max_frame") {
		t.Fatal(e)
	}
	// Nothing was sent; the connection is fine.
	ok := bytes.Repeat([]byte{1}, behaviour.MaxFrame-64)
	if out, err := h.client.CallRaw(bg, "echo", ok); err != nil || !bytes.Equal(out, ok) {
		t.Fatalf("echo just under the limit: %d bytes, %v", len(out), err)
	}
}

func pingAndIdentity(t *testing.T, h *harness) {
	if _, err := h.client.Ping(bg); err != nil {
		t.Fatal(err)
	}
	peer := h.client.Peer()
	if peer.Peer.Name != "behaviour" || peer.Peer.Lang != "go" || peer.Window != behaviour.Window || peer.MaxFrame != behaviour.MaxFrame {
		t.Fatalf("peer: %+v", peer)
	}
	if m := peer.Method("count"); m == nil || m.Kind != hubwire.KindServerStream {
		t.Fatalf("count: %+v", m)
	}
	if m := peer.Method("echo"); m == nil || m.Input.(map[string]any)["contentMediaType"] != "application/octet-stream" {
		t.Fatalf("echo: %+v", m)
	}
}

func peerCrashFailsInFlight(t *testing.T, h *harness) {
	results := make(chan error, 10)
	for i := range 10 {
		go func() {
			_, err := hubwire.Call[any](bg, h.client, "sleep", behaviour.Tagged{Token: h.token(fmt.Sprint("crash", i)), N: 60_000})
			results <- err
		}()
	}
	stream, err := hubwire.ServerStream[int64](bg, h.client, "slow_stream", behaviour.Tagged{Token: h.token("crash-s"), N: 10})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := stream.Recv(); v != 0 || err != nil {
		t.Fatal(v, err)
	}
	// Every REQUEST has reached the provider once a PING came back after them.
	if _, err := h.client.Ping(bg); err != nil {
		t.Fatal(err)
	}
	h.kill()
	for range 10 {
		select {
		case err := <-results:
			expectCode(t, err, hubwire.CodeUnavailable)
		case <-time.After(5 * time.Second):
			t.Fatal("an in-flight call was left hanging")
		}
	}
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			t.Fatal("the stream ended cleanly after a crash")
		}
		if err != nil {
			expectCode(t, err, hubwire.CodeUnavailable)
			break
		}
	}
	// New calls fail at once, too.
	_, err = h.client.CallRaw(bg, "echo", nil)
	expectCode(t, err, hubwire.CodeUnavailable)
	select {
	case <-h.client.Done():
	default:
		t.Fatal("the connection is not done")
	}
}

func strayOutputIsLogged(t *testing.T, h *harness) {
	for i := range 20 {
		if v, err := hubwire.Call[string](bg, h.client, "shout", fmt.Sprintf("hi %d", i)); v != fmt.Sprintf("HI %d", i) || err != nil {
			t.Fatalf("shout %d: %q %v", i, v, err)
		}
	}
	if out, err := hubwire.Call[[]byte](bg, h.client, "echo", []byte{1, 2}); !bytes.Equal(out, []byte{1, 2}) || err != nil {
		t.Fatal(out, err)
	}
	if h.setup.transport != "child" {
		return // in-process, the noise went to the test's own stdout, which is not the connection either
	}
	has := func(stream, text string) bool {
		for _, l := range h.lines() {
			if l.stream == stream && strings.Contains(l.line, text) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(5 * time.Second); !has("stderr", "noise hi 19") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []logLine{{"stdout", "HW garbage hi 3"}, {"stderr", "noise hi 19"}, {"stdout", "behaviour-provider starting"}} {
		if !has(want.stream, want.line) {
			t.Fatalf("no %s line containing %q: %v", want.stream, want.line, h.lines())
		}
	}
}
