package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"hubwire.invalid/bench/grpcbench/grpcecho"
)

type report struct {
	Calls     int64   `json:"calls"`
	ElapsedNs int64   `json:"elapsed_ns"`
	CPUNs     int64   `json:"cpu_ns"`
	P50Ns     float64 `json:"p50_ns,omitempty"`
	P99Ns     float64 `json:"p99_ns,omitempty"`
	P999Ns    float64 `json:"p999_ns,omitempty"`
	MeanNs    float64 `json:"mean_ns,omitempty"`
}

// caller makes one round trip; open returns a fresh one per goroutine.
type caller func() error

func client(args []string) error {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	network := fs.String("network", "unix", "unix or tcp")
	addr := fs.String("addr", "", "server address")
	kind := fs.String("kind", "unary", "unary or stream")
	size := fs.Int("size", 16, "payload bytes")
	window := fs.Int("window", 0, "calls in flight; 0 = one, with per-call latency")
	warmupMs := fs.Int("warmup-ms", 300, "warm-up")
	measureMs := fs.Int("measure-ms", 2000, "measured part")
	max := fs.Int64("max", 1<<24, "at most this many measured calls (one in flight)")
	serverPid := fs.Int("server-pid", 0, "the server, whose CPU time counts too")
	fs.Parse(args)

	conn, err := grpc.NewClient("passthrough:///bench",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, *network, *addr)
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	data := make([]byte, *size)
	for i := range data {
		data[i] = byte(i % 251)
	}
	in := &grpcecho.Blob{Data: data}
	ctx := context.Background()
	check := func(out *grpcecho.Blob) error {
		if len(out.Data) != len(data) {
			return fmt.Errorf("answer of %d bytes to a call of %d", len(out.Data), len(data))
		}
		return nil
	}

	warm := time.Duration(*warmupMs) * time.Millisecond
	measure := time.Duration(*measureMs) * time.Millisecond
	var r report
	if *window == 0 {
		var call caller
		if *kind == "stream" {
			st, err := conn.NewStream(ctx, &grpcecho.Desc.Streams[0], grpcecho.StreamMethod)
			if err != nil {
				return err
			}
			call = func() error {
				if err := st.SendMsg(in); err != nil {
					return err
				}
				out := new(grpcecho.Blob)
				if err := st.RecvMsg(out); err != nil {
					return err
				}
				return check(out)
			}
		} else {
			call = func() error {
				out := new(grpcecho.Blob)
				if err := conn.Invoke(ctx, grpcecho.UnaryMethod, in, out); err != nil {
					return err
				}
				return check(out)
			}
		}
		if _, err := sequential(call, time.Now().Add(warm), 1<<40); err != nil {
			return err
		}
		cpu0 := cpuNs(*serverPid)
		t0 := time.Now()
		lat, err := sequential(call, t0.Add(measure), *max)
		r.ElapsedNs = time.Since(t0).Nanoseconds()
		r.CPUNs = cpuNs(*serverPid) - cpu0
		if err != nil {
			return err
		}
		r.Calls = int64(len(lat))
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		rank := func(q float64) float64 {
			i := int(q*float64(len(lat))+0.999999) - 1
			if i < 0 {
				i = 0
			}
			return float64(lat[i])
		}
		var sum float64
		for _, l := range lat {
			sum += float64(l)
		}
		r.P50Ns, r.P99Ns, r.P999Ns, r.MeanNs = rank(0.5), rank(0.99), rank(0.999), sum/float64(len(lat))
	} else {
		run := func(d time.Duration) (int64, time.Duration, error) {
			if *kind == "stream" {
				return pipelinedStream(ctx, conn, in, check, *window, d)
			}
			return pipelinedUnary(ctx, conn, in, check, *window, d)
		}
		if _, _, err := run(warm); err != nil {
			return err
		}
		cpu0 := cpuNs(*serverPid)
		n, el, err := run(measure)
		r.CPUNs = cpuNs(*serverPid) - cpu0
		if err != nil {
			return err
		}
		r.Calls, r.ElapsedNs = n, el.Nanoseconds()
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// sequential calls one at a time until the deadline or max calls.
func sequential(call caller, until time.Time, max int64) ([]int64, error) {
	lat := make([]int64, 0, 1<<16)
	t0 := time.Now()
	for i := int64(0); i < max; i++ {
		if err := call(); err != nil {
			return nil, err
		}
		t1 := time.Now()
		lat = append(lat, t1.Sub(t0).Nanoseconds())
		if !t1.Before(until) {
			break
		}
		t0 = t1
	}
	return lat, nil
}

// pipelinedUnary: window goroutines calling until the time is up.
func pipelinedUnary(ctx context.Context, conn *grpc.ClientConn, in *grpcecho.Blob, check func(*grpcecho.Blob) error, window int, d time.Duration) (int64, time.Duration, error) {
	var done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	t0 := time.Now()
	until := t0.Add(d)
	for i := 0; i < window; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) {
				out := new(grpcecho.Blob)
				err := conn.Invoke(ctx, grpcecho.UnaryMethod, in, out)
				if err == nil {
					err = check(out)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if e, ok := firstErr.Load().(error); ok {
		return 0, 0, e
	}
	return done.Load(), time.Since(t0), nil
}

// pipelinedStream: one stream; a sender goroutine stays window messages
// ahead of the answers.
func pipelinedStream(ctx context.Context, conn *grpc.ClientConn, in *grpcecho.Blob, check func(*grpcecho.Blob) error, window int, d time.Duration) (int64, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := conn.NewStream(ctx, &grpcecho.Desc.Streams[0], grpcecho.StreamMethod)
	if err != nil {
		return 0, 0, err
	}
	credits := make(chan struct{}, window)
	for i := 0; i < window; i++ {
		credits <- struct{}{}
	}
	var sent atomic.Int64
	t0 := time.Now()
	until := t0.Add(d)
	sendErr := make(chan error, 1)
	go func() {
		for time.Now().Before(until) {
			<-credits
			if err := st.SendMsg(in); err != nil {
				sendErr <- err
				return
			}
			sent.Add(1)
		}
		sendErr <- st.CloseSend()
	}()
	var got int64
	for {
		out := new(grpcecho.Blob)
		if err := st.RecvMsg(out); err != nil {
			break // io.EOF once the server has answered everything
		}
		if err := check(out); err != nil {
			return 0, 0, err
		}
		got++
		credits <- struct{}{}
	}
	if err := <-sendErr; err != nil {
		return 0, 0, err
	}
	if got != sent.Load() {
		return 0, 0, fmt.Errorf("stream ended after %d answers to %d calls", got, sent.Load())
	}
	return got, time.Since(t0), nil
}

// cpuNs is this process's CPU time plus the server's (every thread's
// schedstat), in ns.
func cpuNs(serverPid int) int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	ns := ru.Utime.Nano() + ru.Stime.Nano()
	if serverPid > 0 {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", serverPid))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			if f := strings.Fields(string(b)); len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				ns += v
			}
		}
	}
	return ns
}
