package main

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"regexp"
	"time"

	hubwire "hubwire.dev/go"
)

// The client role: one "call" command becomes one call and one "result"
// event.

func num(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		return int64(x), true
	}
	return 0, false
}

// rawInput is a command's raw input: input_text, input_hex or input_fill.
func rawInput(cmd map[string]any) []byte {
	if s, ok := cmd["input_text"].(string); ok {
		return []byte(s)
	}
	if s, ok := cmd["input_hex"].(string); ok {
		b, _ := hex.DecodeString(s)
		return b
	}
	if f, ok := cmd["input_fill"].([]any); ok && len(f) == 2 {
		b, _ := num(f[0])
		n, _ := num(f[1])
		out := make([]byte, n)
		for i := range out {
			out[i] = byte(b)
		}
		return out
	}
	return []byte{}
}

var hexRe = regexp.MustCompile(`^([0-9a-fA-F]{2})*$`)

// rawItem is a raw stream item: hex when it is hex, else its UTF-8 bytes.
func rawItem(v any) []byte {
	s, _ := v.(string)
	if hexRe.MatchString(s) {
		b, _ := hex.DecodeString(s)
		return b
	}
	return []byte(s)
}

// errDropped: the testee dropped the call itself (read, cancel_after_ms).
var errDropped = errors.New("dropped by the testee")

func ping(ev *events, conn *hubwire.Connection, cmd map[string]any) {
	_, err := conn.Ping(context.Background())
	r := map[string]any{"event": "result", "id": cmd["id"], "code": hubwire.CodeOf(err).String()}
	if err != nil {
		r["message"] = err.Error()
	}
	ev.emit(r)
}

func call(conn *hubwire.Connection, cmd map[string]any) map[string]any {
	r := map[string]any{"event": "result", "id": cmd["id"]}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if ms, ok := num(cmd["timeout_ms"]); ok && ms > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer stop()
	}
	if ms, ok := num(cmd["cancel_after_ms"]); ok {
		t := time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { cancel(errDropped) })
		defer t.Stop()
	}
	codec := hubwire.CodecMsgpack
	switch cmd["codec"] {
	case "raw":
		codec = hubwire.CodecRaw
	case "json":
		codec = hubwire.CodecJSON
	}
	var err error
	if codec == hubwire.CodecRaw {
		err = run(ctx, conn, cmd, r, codec, rawInput(cmd), rawItem, func(b []byte) any { return hex.EncodeToString(b) })
	} else {
		err = run(ctx, conn, cmd, r, codec, cmd["input"], func(v any) any { return v }, func(v any) any { return v })
	}
	switch {
	case err == nil:
		r["code"] = "ok"
	case errors.Is(err, errDropped) || context.Cause(ctx) == errDropped:
		r["code"], r["message"] = "cancelled", "dropped by the testee"
	default:
		r["code"], r["message"] = hubwire.CodeOf(err).String(), err.Error()
		var f *hubwire.Failure[any]
		if errors.As(err, &f) {
			r["failure"] = f.Value
		}
	}
	return r
}

// run makes the call with values of type T (raw bytes or dynamic values).
func run[T any](ctx context.Context, conn *hubwire.Connection, cmd, r map[string]any, codec hubwire.Codec,
	input T, item func(any) T, show func(T) any) error {
	method, _ := cmd["method"].(string)
	var items []T
	if list, ok := cmd["items"].([]any); ok {
		for _, v := range list {
			items = append(items, item(v))
		}
	}
	end := cmd["end"] != false
	read, limited := num(cmd["read"])
	opt := hubwire.WithCodec(codec)
	readItems := func(s *hubwire.ItemStream[T]) error {
		got := []any{}
		defer func() { r["items"] = got }()
		for {
			if limited && int64(len(got)) == read {
				s.Close()
				return errDropped
			}
			v, err := s.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			got = append(got, show(v))
		}
	}
	switch cmd["kind"] {
	case nil, "unary":
		out, err := hubwire.Call[T](ctx, conn, method, input, opt)
		if err == nil {
			if codec == hubwire.CodecRaw {
				r["output_hex"] = show(out)
			} else {
				r["output"] = show(out)
			}
		}
		return err
	case "server_stream":
		s, err := hubwire.ServerStream[T](ctx, conn, method, input, opt)
		if err != nil {
			return err
		}
		return readItems(s)
	case "client_stream":
		c, err := hubwire.ClientStream[T, T](ctx, conn, method, opt)
		if err != nil {
			return err
		}
		for _, v := range items {
			// A send fails once the call has ended (the callee may answer
			// early): the answer says how.
			if c.Send(v) != nil {
				break
			}
		}
		var out T
		if end {
			out, err = c.Finish()
		} else {
			out, err = c.Response()
		}
		if err == nil {
			r["output"] = show(out)
		}
		return err
	case "bidi":
		sink, s, err := hubwire.Bidi[T, T](ctx, conn, method, opt)
		if err != nil {
			return err
		}
		sent := make(chan error, 1)
		go func() {
			for _, v := range items {
				if err := sink.Send(v); err != nil {
					sent <- err
					return
				}
			}
			if end {
				sink.CloseSend()
			}
			sent <- nil
		}()
		err = readItems(s)
		if serr := <-sent; err == nil && serr != nil {
			return serr
		}
		return err
	}
	return hubwire.Errorf(hubwire.CodeInvalidArgument, "unknown kind %v", cmd["kind"])
}
