package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	hubwire "hubwire.dev/go"
	"hubwire.dev/go/hubwiretest"
	"hubwire.dev/go/transport"
)

// hubwire from Go, beside the study's variants: a raw unary call of the
// same 15 bytes over a child's socketpair, a Unix socket, TCP (the
// provider in another process, as in the study) and in process, in each
// wait mode, and through the hub; then pipelined calls on one Unix
// connection.

var modes = []struct {
	name string
	wait hubwire.WaitMode
}{{"efficient", hubwire.WaitEfficient}, {"low-latency", hubwire.WaitLowLatency}}

// roundTrips times b.N raw unary calls on conn; pids are the row's other
// processes (their CPU counts).
func roundTrips(b *testing.B, conn *hubwire.Connection, pids ...int) {
	ctx := context.Background()
	for range 1000 { // warm up: buffers, spin state, the scheduler
		if _, err := conn.CallRaw(ctx, "echo", msg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	c := startCPU(pids...)
	b.ResetTimer()
	for range b.N {
		out, err := conn.CallRaw(ctx, "echo", msg)
		if err != nil || len(out) != len(msg) {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.report(b)
}

func BenchmarkHubwire(b *testing.B) {
	for _, m := range modes {
		opts := hubwire.ConnectionOptions{Name: "bench", Wait: m.wait}
		env := "HUBWIRE_WAIT=" + m.name
		b.Run("child/"+m.name, func(b *testing.B) {
			cmd := peerCmd("hubwire-child", "", env)
			cmd.Stderr = nil // Spawn reads it
			child, err := transport.Spawn(cmd, "echo", nil)
			if err != nil {
				b.Fatal(err)
			}
			conn, err := hubwire.Dial(child, opts)
			if err != nil {
				child.Kill()
				b.Fatal(err)
			}
			defer func() {
				// Closing the connection ends the child; kill it only if it hangs.
				conn.Close()
				t := time.AfterFunc(3*time.Second, func() { child.Kill() })
				child.Wait()
				t.Stop()
			}()
			roundTrips(b, conn, child.Cmd.Process.Pid)
		})
		b.Run("unix/"+m.name, func(b *testing.B) {
			p := startPeer(b, "hubwire-unix", sockPath(b, "hw.sock"), env)
			conn, err := hubwire.DialUnix(p.addr, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			roundTrips(b, conn, p.cmd.Process.Pid)
		})
		b.Run("tcp/"+m.name, func(b *testing.B) {
			p := startPeer(b, "hubwire-tcp", "127.0.0.1:0", env)
			conn, err := hubwire.DialTCP(p.addr, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			roundTrips(b, conn, p.cmd.Process.Pid)
		})
		b.Run("inproc/"+m.name, func(b *testing.B) {
			server := opts
			conns := hubwiretest.PairWith(Echo(), opts, server)
			defer conns.Close()
			roundTrips(b, conns.Client)
		})
		b.Run("hub/"+m.name, func(b *testing.B) {
			hub := os.Getenv("HUBWIRE_BIN")
			if hub == "" {
				b.Skip("HUBWIRE_BIN (the hubwire hub executable) is not set")
			}
			conn, pid := startHub(b, hub, m.name)
			defer conn.Close()
			roundTrips(b, conn, append([]int{pid}, children(pid)...)...)
		})
	}
}

// startHub runs `hubwire hub` with the echo provider (this binary) as its
// child, and dials it.
func startHub(b *testing.B, hub, wait string) (*hubwire.Connection, int) {
	dir := b.TempDir()
	exe, _ := filepath.Abs(os.Args[0])
	config := fmt.Sprintf(`[hub]
name = "bench-hub"
unix = "hub.sock"
wait = %q

[[provider]]
name = "echo"
exec = [%q, "-test.run=^$"]
env = { BENCH_PEER = "hubwire-child", HUBWIRE_WAIT = %q }
`, wait, exe, wait)
	path := filepath.Join(dir, "hub.toml")
	os.WriteFile(path, []byte(config), 0o644)
	cmd := exec.Command(hub, "hub", "--config", path)
	cmd.Env = append(os.Environ(), "HUBWIRE_WAIT="+wait)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	w := hubwire.WaitEfficient
	if wait == "low-latency" {
		w = hubwire.WaitLowLatency
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := hubwire.DialUnix(filepath.Join(dir, "hub.sock"), hubwire.ConnectionOptions{Name: "bench", Wait: w})
		if err == nil {
			if _, err = conn.CallRaw(context.Background(), "echo", msg); err == nil {
				return conn, cmd.Process.Pid
			}
			conn.Close()
		}
		if time.Now().After(deadline) {
			b.Fatalf("the hub did not serve echo: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkPipelined: many small calls in flight on one Unix connection
// (64 goroutines per processor); ns/op is wall time per call, so calls/s
// is 1e9 divided by it.
func BenchmarkPipelined(b *testing.B) {
	for _, m := range modes {
		b.Run("unix/"+m.name, func(b *testing.B) {
			p := startPeer(b, "hubwire-unix", sockPath(b, "pipe.sock"), "HUBWIRE_WAIT="+m.name)
			conn, err := hubwire.DialUnix(p.addr, hubwire.ConnectionOptions{Name: "bench", Wait: m.wait})
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			b.ReportAllocs()
			c := startCPU(p.cmd.Process.Pid)
			start := time.Now()
			b.SetParallelism(64) // 64 goroutines per processor: 128 in flight on 2
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, err := conn.CallRaw(ctx, "echo", msg); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			c.report(b)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
