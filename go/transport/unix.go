//go:build unix

package transport

import (
	"net"
	"os"
)

type listener struct {
	l    net.Listener
	kind string
}

func (l *listener) Accept() (Transport, error) {
	c, err := l.l.Accept()
	if err != nil {
		return nil, err
	}
	return NewConn(c, l.kind+":"+c.RemoteAddr().String())
}

func (l *listener) Close() error { return l.l.Close() }
func (l *listener) Addr() string { return l.l.Addr().String() }

// ListenUnix listens on a Unix socket at path, removing a stale socket
// file left there by a process that did not clean up.
func ListenUnix(path string) (Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	return &listener{l: l, kind: "unix"}, nil
}

// DialUnix connects to the Unix socket at path.
func DialUnix(path string) (*Conn, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return NewConn(c, "unix:"+path)
}
