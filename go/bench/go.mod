module hubwire.dev/go/bench

go 1.26.0

require (
	google.golang.org/grpc v1.85.0
	hubwire.dev/go v0.0.0
	hubwire.invalid/bench/grpcbench v0.0.0
)

require (
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace hubwire.dev/go => ..

// The gRPC echo service, shared with the Rust suite's grpc-go baseline.
replace hubwire.invalid/bench/grpcbench => ../../bench/go
