// Package grpcecho is the echo service every grpc-go baseline of the
// benchmarks answers with: the Rust suite's grpcbench (bench/go) and the Go
// SDK's study-003 bench (go/bench). One message, protobuf
// `message Blob { bytes data = 1; }`, encoded by hand so nothing needs
// protoc; methods Unary and Stream (each message back as it comes).
package grpcecho

import (
	"context"
	"encoding/binary"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// Blob is the one message: protobuf `bytes data = 1`.
type Blob struct {
	Data []byte
}

// blobCodec encodes Blob as its protobuf wire form, replacing the default
// "proto" codec in a program that imports this package (the benches only
// ever send Blobs).
type blobCodec struct{}

func (blobCodec) Name() string { return "proto" }

func (blobCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*Blob)
	if !ok {
		return nil, errors.New("blobCodec: not a *Blob")
	}
	out := make([]byte, 0, len(b.Data)+binary.MaxVarintLen64+1)
	out = append(out, 0x0a) // field 1, length-delimited
	out = binary.AppendUvarint(out, uint64(len(b.Data)))
	return append(out, b.Data...), nil
}

func (blobCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*Blob)
	if !ok {
		return errors.New("blobCodec: not a *Blob")
	}
	b.Data = nil
	if len(data) == 0 {
		return nil // an empty message: data is empty
	}
	if data[0] != 0x0a {
		return errors.New("blobCodec: expected field 1 (bytes)")
	}
	n, k := binary.Uvarint(data[1:])
	if k <= 0 || uint64(len(data)-1-k) < n {
		return errors.New("blobCodec: truncated")
	}
	b.Data = data[1+k : 1+k+int(n)]
	return nil
}

func init() { encoding.RegisterCodec(blobCodec{}) }

// echoService is the (empty) handler type; the handlers need no state.
type echoService interface{}

// Desc is the echo service: register it with `s.RegisterService(&Desc,
// struct{}{})`; call UnaryMethod and StreamMethod.
var Desc = grpc.ServiceDesc{
	ServiceName: "bench.Echo",
	HandlerType: (*echoService)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(Blob)
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		ClientStreams: true,
		// Each message goes back as it comes.
		Handler: func(_ any, stream grpc.ServerStream) error {
			for {
				m := new(Blob)
				if err := stream.RecvMsg(m); err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
				if err := stream.SendMsg(m); err != nil {
					return err
				}
			}
		},
	}},
}

// The full method names a client calls.
const (
	UnaryMethod  = "/bench.Echo/Unary"
	StreamMethod = "/bench.Echo/Stream"
)
