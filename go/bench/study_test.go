package bench

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"hubwire.invalid/bench/grpcbench/grpcecho"
)

// The study's own variants, written as it describes them: a provider
// process started with os/exec, talked to over its stdin/stdout (Cli), by
// net/http (Web), or by gRPC, unary or on a stream, over TCP or a Unix
// socket. One call in flight; each op is one round trip of the 15-byte
// message.

func BenchmarkCli(b *testing.B) {
	cmd := peerCmd("cli", "")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	r := bufio.NewReader(stdout)
	line := append(append([]byte(nil), msg...), '\n')
	b.ReportAllocs()
	c := startCPU(cmd.Process.Pid)
	b.ResetTimer()
	for range b.N {
		if _, err := stdin.Write(line); err != nil {
			b.Fatal(err)
		}
		got, err := r.ReadSlice('\n')
		if err != nil || len(got) != len(line) {
			b.Fatalf("%q %v", got, err)
		}
	}
	b.StopTimer()
	c.report(b)
}

func BenchmarkWeb(b *testing.B) {
	p := startPeer(b, "web", "")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	url := "http://" + p.addr + "/chat"
	b.ReportAllocs()
	c := startCPU(p.cmd.Process.Pid)
	b.ResetTimer()
	for range b.N {
		resp, err := client.Post(url, "application/json", bytes.NewReader(msg))
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(body) != len(msg) {
			b.Fatalf("%q %v", body, err)
		}
	}
	b.StopTimer()
	c.report(b)
}

func grpcConn(b *testing.B, network string) (*grpc.ClientConn, int) {
	kind, addr := "grpc-tcp", "127.0.0.1:0"
	if network == "unix" {
		kind, addr = "grpc-unix", sockPath(b, "grpc.sock")
	}
	p := startPeer(b, kind, addr)
	conn, err := grpc.NewClient("passthrough:///study003",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, p.addr)
		}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn, p.cmd.Process.Pid
}

func grpcUnary(b *testing.B, network string) {
	conn, pid := grpcConn(b, network)
	ctx := context.Background()
	in, out := &grpcecho.Blob{Data: msg}, new(grpcecho.Blob)
	if err := conn.Invoke(ctx, grpcecho.UnaryMethod, in, out); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	c := startCPU(pid)
	b.ResetTimer()
	for range b.N {
		if err := conn.Invoke(ctx, grpcecho.UnaryMethod, in, out); err != nil || len(out.Data) != len(msg) {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.report(b)
}

func grpcStream(b *testing.B, network string) {
	conn, pid := grpcConn(b, network)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := conn.NewStream(ctx, &grpcecho.Desc.Streams[0], grpcecho.StreamMethod)
	if err != nil {
		b.Fatal(err)
	}
	in, out := &grpcecho.Blob{Data: msg}, new(grpcecho.Blob)
	b.ReportAllocs()
	c := startCPU(pid)
	b.ResetTimer()
	for range b.N {
		if err := s.SendMsg(in); err != nil {
			b.Fatal(err)
		}
		if err := s.RecvMsg(out); err != nil || len(out.Data) != len(msg) {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.report(b)
}

func BenchmarkGrpcTcp(b *testing.B)           { grpcUnary(b, "tcp") }
func BenchmarkGrpcSocket(b *testing.B)        { grpcUnary(b, "unix") }
func BenchmarkGrpcTcp_Stream(b *testing.B)    { grpcStream(b, "tcp") }
func BenchmarkGrpcSocket_Stream(b *testing.B) { grpcStream(b, "unix") }
