//go:build unix

package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ChildFD is the descriptor a child provider finds its end of the
// socketpair on (spec/PROTOCOL.md §10), and EnvFD the variable that says so.
const (
	ChildFD = 3
	EnvFD   = "HUBWIRE_FD"
)

// LogFunc receives each line a child prints: the child's name, "stdout" or
// "stderr", and the line without its newline (invalid UTF-8 replaced).
type LogFunc func(name, stream, line string)

// Child is a provider process started by Spawn, and the parent's end of
// its socketpair.
type Child struct {
	*Conn
	// Cmd is the running process.
	Cmd  *exec.Cmd
	logs sync.WaitGroup
	once sync.Once
	err  error
}

// Spawn starts cmd as a child provider: a socketpair's other end becomes
// its descriptor 3 and HUBWIRE_FD=3 is added to its environment; its stdin
// is cmd.Stdin (nil: /dev/null); its stdout and stderr are read line by
// line and handed to logf (nil: the standard logger, tagged with name), so
// a stray print in the child never touches the framing. The parent is the
// dialer.
func Spawn(cmd *exec.Cmd, name string, logf LogFunc) (*Child, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("spawn provider %s: socketpair: %w", name, err)
	}
	ours := os.NewFile(uintptr(fds[0]), "hubwire-child-parent")
	theirs := os.NewFile(uintptr(fds[1]), "hubwire-child")
	defer theirs.Close()
	defer ours.Close() // net.FileConn dups it
	if logf == nil {
		logf = func(name, stream, line string) { log.Printf("[%s %s] %s", name, stream, line) }
	}
	cmd.ExtraFiles = append([]*os.File{theirs}, cmd.ExtraFiles...)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, EnvFD+"="+strconv.Itoa(ChildFD))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	nc, err := net.FileConn(ours)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("spawn provider %s: %w", name, err)
	}
	conn, err := NewConn(nc, fmt.Sprintf("child:%s[%d]", name, cmd.Process.Pid))
	if err != nil {
		cmd.Process.Kill()
		return nil, err
	}
	c := &Child{Conn: conn, Cmd: cmd}
	c.logs.Add(2)
	go c.forward(stdout, name, "stdout", logf)
	go c.forward(stderr, name, "stderr", logf)
	return c, nil
}

func (c *Child) forward(r io.Reader, name, stream string, logf LogFunc) {
	defer c.logs.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		logf(name, stream, strings.ToValidUTF8(strings.TrimRight(sc.Text(), "\r"), "\uFFFD"))
	}
	io.Copy(io.Discard, r) // a line over 1 MiB: drain the rest
}

// Kill ends the child at once (SIGKILL) and closes our end.
func (c *Child) Kill() error {
	c.Conn.Close()
	return c.Cmd.Process.Kill()
}

// Wait waits for the child to exit and for its output to be logged.
func (c *Child) Wait() error {
	c.once.Do(func() {
		c.logs.Wait()
		c.err = c.Cmd.Wait()
	})
	return c.err
}

// StartedByParent reports whether this process was started by a hubwire
// parent (HUBWIRE_FD is set).
func StartedByParent() bool {
	_, ok := os.LookupEnv(EnvFD)
	return ok
}

// FromEnv returns, in a child started by Spawn (or any parent following
// spec §10), the transport to the parent; an error if HUBWIRE_FD is not
// set or names no socket. It unsets HUBWIRE_FD, so the child's own
// children do not take the descriptor too.
func FromEnv() (*Conn, error) {
	v, ok := os.LookupEnv(EnvFD)
	if !ok {
		return nil, errors.New("HUBWIRE_FD is not set: this program must be started by a hubwire parent")
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("%s=%q is not a descriptor number", EnvFD, v)
	}
	os.Unsetenv(EnvFD)
	f := os.NewFile(uintptr(fd), "hubwire-parent")
	defer f.Close()
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("%s=%d: %w", EnvFD, fd, err)
	}
	return NewConn(nc, fmt.Sprintf("parent:fd%d", fd))
}
