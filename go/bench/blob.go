// Package bench reproduces study 003 (docs/studies.md) in its own
// language: the study's variants — Cli, Web, GrpcTcp, GrpcSocket,
// GrpcTcp_Stream, GrpcSocket_Stream — written as the study describes them,
// beside hubwire from Go on every transport and wait mode, and through the
// hub, all measured in the same `go test -bench` run. See README.md.
package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// msg is the study's chat message, as bench/'s rtt scenario sends it: 15
// bytes of JSON.
var msg = []byte(`{"msg":"hello"}`)

// Blob is the gRPC rows' one message, protobuf `bytes data = 1`, encoded
// by hand so the bench needs no protoc.
type Blob struct{ Data []byte }

type blobCodec struct{}

func (blobCodec) Name() string { return "proto" }

func (blobCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*Blob)
	if !ok {
		return nil, errors.New("bench: not a *Blob")
	}
	out := make([]byte, 0, len(b.Data)+6)
	out = append(out, 0x0a) // field 1, wire type 2 (length-delimited)
	out = binary.AppendUvarint(out, uint64(len(b.Data)))
	return append(out, b.Data...), nil
}

func (blobCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*Blob)
	if !ok {
		return errors.New("bench: not a *Blob")
	}
	b.Data = nil
	if len(data) == 0 {
		return nil
	}
	n, k := binary.Uvarint(data[1:])
	if data[0] != 0x0a || k <= 0 || uint64(len(data)-1-k) < n {
		return errors.New("bench: malformed Blob")
	}
	b.Data = data[1+k : 1+k+int(n)]
	return nil
}

func init() { encoding.RegisterCodec(blobCodec{}) }

type echoServer interface{}

// echoDesc is the gRPC echo service: Unary, and Stream (each message back
// as it comes).
var echoDesc = grpc.ServiceDesc{
	ServiceName: "study003.Echo",
	HandlerType: (*echoServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(Blob)
			return in, dec(in)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName: "Stream", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, s grpc.ServerStream) error {
			for {
				m := new(Blob)
				if err := s.RecvMsg(m); err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
				if err := s.SendMsg(m); err != nil {
					return err
				}
			}
		},
	}},
}
