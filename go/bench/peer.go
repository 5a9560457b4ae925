package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"

	"google.golang.org/grpc"
	hubwire "hubwire.dev/go"
	"hubwire.dev/go/transport"
	"hubwire.invalid/bench/grpcbench/grpcecho"
)

// The other process of every cross-process row: the bench's test binary
// run again with BENCH_PEER set (see TestMain). It prints "ready ADDR" on
// stdout once it listens, where it has an address.

// Echo is the hubwire provider of the hubwire rows: raw bytes back.
func Echo() *hubwire.Provider {
	return hubwire.NewProvider("study003").
		Unary("echo", hubwire.UnaryFunc(func(ctx context.Context, b []byte) ([]byte, error) { return b, nil }))
}

// RunPeer runs the peer named kind with address addr; it returns when the
// peer is done (stdin or the parent closed).
func RunPeer(kind, addr string) error {
	switch kind {
	case "cli":
		// The study's Cli: one line on stdin, one line on stdout.
		in := bufio.NewScanner(os.Stdin)
		out := bufio.NewWriter(os.Stdout)
		for in.Scan() {
			out.Write(in.Bytes())
			out.WriteByte('\n')
			if err := out.Flush(); err != nil {
				return err
			}
		}
		return nil
	case "web":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		fmt.Printf("ready %s\n", l.Addr())
		go exitWithStdin()
		return http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
		}))
	case "grpc-tcp", "grpc-unix":
		network := "tcp"
		if kind == "grpc-unix" {
			network = "unix"
		}
		l, err := net.Listen(network, addr)
		if err != nil {
			return err
		}
		fmt.Printf("ready %s\n", l.Addr())
		go exitWithStdin()
		s := grpc.NewServer()
		s.RegisterService(&grpcecho.Desc, struct{}{})
		return s.Serve(l)
	case "hubwire-child":
		defer profile()()
		return Echo().ServeChild(hubwire.ConnectionOptions{Wait: waitFromEnv()})
	case "hubwire-unix", "hubwire-tcp":
		var l transport.Listener
		var err error
		if kind == "hubwire-unix" {
			l, err = transport.ListenUnix(addr)
		} else {
			l, err = transport.ListenTCP(addr)
		}
		if err != nil {
			return err
		}
		fmt.Printf("ready %s\n", l.Addr())
		stop := profile()
		go func() {
			io.Copy(io.Discard, os.Stdin)
			stop()
			os.Exit(0)
		}()
		return Echo().Serve(l, hubwire.ConnectionOptions{Wait: waitFromEnv()})
	}
	return fmt.Errorf("unknown peer %q", kind)
}

// profile starts a CPU profile of this peer if BENCH_PEER_CPUPROFILE names
// a file; the returned function stops it.
func profile() func() {
	path := os.Getenv("BENCH_PEER_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil || pprof.StartCPUProfile(f) != nil {
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

func waitFromEnv() hubwire.WaitMode {
	if os.Getenv("HUBWIRE_WAIT") == "low-latency" {
		return hubwire.WaitLowLatency
	}
	return hubwire.WaitEfficient
}

// exitWithStdin ends a listening peer when its parent closes its stdin.
func exitWithStdin() {
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
