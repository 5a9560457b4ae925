// Package bench reproduces study 003 (docs/studies.md) in its own
// language: the study's variants — Cli, Web, GrpcTcp, GrpcSocket,
// GrpcTcp_Stream, GrpcSocket_Stream — written as the study describes them,
// beside hubwire from Go on every transport and wait mode, and through the
// hub, all measured in the same `go test -bench` run. See README.md.
package bench

// msg is the study's chat message, as bench/'s rtt scenario sends it: 15
// bytes of JSON.
var msg = []byte(`{"msg":"hello"}`)

// The gRPC rows use the echo service of bench/go/grpcecho, the same one
// the Rust suite's grpc-go baseline answers with.
