package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain makes the test binary double as every row's other process.
func TestMain(m *testing.M) {
	if kind := os.Getenv("BENCH_PEER"); kind != "" {
		if err := RunPeer(kind, os.Getenv("BENCH_ADDR")); err != nil {
			fmt.Fprintln(os.Stderr, "peer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// peer is a listening peer process; closing its stdin ends it.
type peer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

func peerCmd(kind, addr string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "BENCH_PEER="+kind, "BENCH_ADDR="+addr), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// startPeer starts a peer that listens and waits for its "ready ADDR".
func startPeer(b *testing.B, kind, addr string, env ...string) *peer {
	b.Helper()
	cmd := peerCmd(kind, addr, env...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		b.Fatalf("peer %s: %q %v", kind, line, err)
	}
	p := &peer{cmd: cmd, stdin: stdin, addr: strings.TrimSpace(strings.TrimPrefix(line, "ready "))}
	b.Cleanup(p.stop)
	return p
}

func (p *peer) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

func sockPath(b *testing.B, name string) string {
	return filepath.Join(b.TempDir(), name)
}

// cpu measures the CPU time of this process and of the given others
// (from /proc: clock ticks, so it wants runs of a second or so).
type cpu struct {
	pids  []int
	start time.Duration
}

func ticks(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	k, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(u+k) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// children lists a process's children (for the hub's provider).
func children(pid int) []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func (c *cpu) now() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	for _, p := range c.pids {
		t += ticks(p)
	}
	return t
}

func startCPU(pids ...int) *cpu {
	c := &cpu{pids: pids}
	c.start = c.now()
	return c
}

// report adds the CPU per call of every process of the row, over the
// timed part.
func (c *cpu) report(b *testing.B) {
	b.ReportMetric(float64((c.now()-c.start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
