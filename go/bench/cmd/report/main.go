// Command report runs the study-003 bench (`go test -bench` in go/bench)
// several times, takes each row's median, checks the Go SDK's targets
// (go/bench/README.md) as ratios measured in the same run, and prints the results
// as markdown; with -readme it also rewrites the section of README.md
// between the results markers.
//
//	go run ./cmd/report [-passes 3] [-benchtime 1s] [-readme README.md]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// row is one benchmark's metrics (unit → values, one per pass).
type row map[string][]float64

func (r row) med(unit string) float64 {
	v := slices.Clone(r[unit])
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func main() {
	passes := flag.Int("passes", 3, "runs of the whole bench; each row's median is reported")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	readme := flag.String("readme", "", "rewrite the results section of this file")
	flag.Parse()
	rows := map[string]row{}
	for i := range *passes {
		fmt.Fprintf(os.Stderr, "report: pass %d of %d\n", i+1, *passes)
		cmd := exec.Command("go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", *benchtime)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		os.Stderr.Write(out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report: go test failed:", err)
			os.Exit(1)
		}
		parse(out, rows)
	}
	md := render(rows, *passes, *benchtime)
	fmt.Print(md)
	if *readme != "" {
		if err := rewrite(*readme, md); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
}

// parse reads `BenchmarkName-2  N  v unit  v unit ...` lines.
func parse(out []byte, rows map[string]row) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		r := rows[name]
		if r == nil {
			r = row{}
			rows[name] = r
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				r[f[i+1]] = append(r[f[i+1]], v)
			}
		}
	}
}

// The rows in the order of the table: the study's, then hubwire's.
var order = []struct{ name, label string }{
	{"Cli", "`Cli`: child's stdin/stdout, one line each way"},
	{"Web", "`Web`: net/http POST per call (keep-alive)"},
	{"GrpcTcp", "`GrpcTcp`: grpc-go unary, TCP"},
	{"GrpcSocket", "`GrpcSocket`: grpc-go unary, Unix socket"},
	{"GrpcTcp_Stream", "`GrpcTcp_Stream`: grpc-go bidi stream, TCP"},
	{"GrpcSocket_Stream", "`GrpcSocket_Stream`: grpc-go bidi stream, Unix socket"},
	{"Hubwire/child/efficient", "hubwire, child (fd 3), efficient"},
	{"Hubwire/child/low-latency", "hubwire, child (fd 3), low-latency"},
	{"Hubwire/unix/efficient", "hubwire, Unix socket, efficient"},
	{"Hubwire/unix/low-latency", "hubwire, Unix socket, low-latency"},
	{"Hubwire/tcp/efficient", "hubwire, TCP, efficient"},
	{"Hubwire/tcp/low-latency", "hubwire, TCP, low-latency"},
	{"Hubwire/inproc/efficient", "hubwire, in-process (memory), efficient"},
	{"Hubwire/inproc/low-latency", "hubwire, in-process (memory), low-latency"},
	{"Hubwire/hub/efficient", "hubwire through the hub (Unix → hub → child), efficient"},
	{"Hubwire/hub/low-latency", "hubwire through the hub (Unix → hub → child), low-latency"},
	{"Pipelined/unix/efficient", "hubwire pipelined, 128 in flight, one Unix connection, efficient"},
	{"Pipelined/unix/low-latency", "hubwire pipelined, 128 in flight, one Unix connection, low-latency"},
}

func machine() string {
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(l[strings.IndexByte(l, ':')+1:])
				break
			}
		}
	}
	kernel, _ := exec.Command("uname", "-r").Output()
	return fmt.Sprintf("%s, %d vCPU, Linux %s, %s", cpu, runtime.NumCPU(), strings.TrimSpace(string(kernel)), runtime.Version())
}

func render(rows map[string]row, passes int, benchtime string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s; median of %d passes of `go test -bench . -benchmem -benchtime %s` (the machine is shared: other jobs ran meanwhile).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine(), passes, benchtime)
	cli := rows["Cli"].med("ns/op")
	b.WriteString("| row | µs/call | vs `Cli` | B/op | allocs/op | CPU µs/call (both processes) |\n|---|---:|---:|---:|---:|---:|\n")
	for _, o := range order {
		r, ok := rows[o.name]
		if !ok {
			fmt.Fprintf(&b, "| %s | – | – | – | – | – |\n", o.label)
			continue
		}
		ns := r.med("ns/op")
		extra := ""
		if cs := r.med("calls/s"); cs > 0 {
			extra = fmt.Sprintf(" (%.0f k calls/s)", cs/1000)
		}
		fmt.Fprintf(&b, "| %s | %.1f%s | %.2f× | %.0f | %.0f | %.1f |\n", o.label, ns/1000, extra, ns/cli, r.med("B/op"), r.med("allocs/op"), r.med("cpu-ns/op")/1000)
	}
	b.WriteString("\n**Targets** (ratios within this run):\n\n| target | measured | |\n|---|---|---|\n")
	ns := func(n string) float64 { return rows[n].med("ns/op") }
	target := func(what string, got, limit float64, unit string, lower bool) {
		met := got <= limit
		if !lower {
			met = got >= limit
		}
		verdict := "met"
		if math.IsNaN(got) || math.IsInf(got, 0) || (!lower && got == 0) {
			verdict, got = "not measured", 0
		} else if !met {
			if lower {
				verdict = fmt.Sprintf("missed by %.2f×", got/limit)
			} else {
				verdict = fmt.Sprintf("missed: %.0f%% of it", 100*got/limit)
			}
		}
		fmt.Fprintf(&b, "| %s | %.2f%s | %s |\n", what, got, unit, verdict)
	}
	target("child, efficient ≤ `Cli` per call", ns("Hubwire/child/efficient")/cli, 1, "× `Cli`", true)
	target("child, low-latency ≤ 0.5 × `Cli`", ns("Hubwire/child/low-latency")/cli, 0.5, "× `Cli`", true)
	for _, m := range []string{"efficient", "low-latency"} {
		target("≥ 5× faster than grpc-go unary, Unix ("+m+")", ns("GrpcSocket")/ns("Hubwire/unix/"+m), 5, "×", false)
		target("≥ 5× faster than grpc-go unary, TCP ("+m+")", ns("GrpcTcp")/ns("Hubwire/tcp/"+m), 5, "×", false)
		target("≥ 3× faster than grpc-go stream, Unix ("+m+")", ns("GrpcSocket_Stream")/ns("Hubwire/unix/"+m), 3, "×", false)
		target("≥ 3× faster than grpc-go stream, TCP ("+m+")", ns("GrpcTcp_Stream")/ns("Hubwire/tcp/"+m), 3, "×", false)
	}
	worst := 0.0
	for _, o := range order {
		if strings.HasPrefix(o.name, "Hubwire/") && !strings.Contains(o.name, "inproc") {
			worst = max(worst, rows[o.name].med("allocs/op"))
		}
	}
	target("a raw unary call ≤ 3 allocs/op (caller's side, worst row)", worst, 3, " allocs", true)
	best := max(rows["Pipelined/unix/efficient"].med("calls/s"), rows["Pipelined/unix/low-latency"].med("calls/s"))
	target("pipelined small calls on one Unix connection ≥ 1 M calls/s (best mode)", best/1e6, 1, " M calls/s", false)
	return b.String()
}

const startMark, endMark = "<!-- results:start -->", "<!-- results:end -->"

func rewrite(path, md string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, startMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section", path, startMark, endMark)
	}
	return os.WriteFile(path, []byte(s[:i+len(startMark)]+"\n"+md+s[j:]), 0o644)
}
