// Command grpcbench is the grpc-go baseline of the hubwire benchmark suite
// (bench/rust, systems/grpc_go.rs): the Go hub study's gRPC rows, unary and
// bidirectional stream, over a Unix socket or TCP, both sides in Go.
//
//	grpcbench server (-unix PATH | -tcp ADDR)   prints "ready <addr>", serves
//	grpcbench client -network unix|tcp -addr A -kind unary|stream -size N
//	          [-window W] -warmup-ms MS -measure-ms MS -max N -server-pid P
//
// The client times its own calls and prints one JSON object: calls,
// elapsed_ns, cpu_ns (its own CPU time plus the server's, over the measured
// part only), and for one call in flight (-window 0) p50/p99/p999/mean_ns.
//
// The service is declared by hand (no .proto, no protoc); its message is
// Blob { bytes data = 1; }, encoded by the small codec in grpcecho/.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"

	"hubwire.invalid/bench/grpcbench/grpcecho"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grpcbench server|client [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = server(os.Args[2:])
	case "client":
		err = client(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpcbench:", err)
		os.Exit(1)
	}
}

func server(args []string) error {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	unix := fs.String("unix", "", "listen on this Unix socket path")
	tcp := fs.String("tcp", "", "listen on this TCP address")
	fs.Parse(args)
	var l net.Listener
	var err error
	switch {
	case *unix != "":
		os.Remove(*unix)
		l, err = net.Listen("unix", *unix)
	case *tcp != "":
		l, err = net.Listen("tcp", *tcp)
	default:
		return fmt.Errorf("server needs -unix or -tcp")
	}
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	s.RegisterService(&grpcecho.Desc, struct{}{})
	fmt.Printf("ready %s\n", l.Addr().String())
	return s.Serve(l)
}
