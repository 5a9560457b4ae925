//go:build unix

package transport

import "net"

// ListenTCP listens on a TCP address (host:port; port 0 picks a free one,
// which Addr then reports). Accepted connections have TCP_NODELAY set, as
// the spec recommends (Go's default).
func ListenTCP(addr string) (Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &listener{l: l, kind: "tcp"}, nil
}

// DialTCP connects to a TCP address, with TCP_NODELAY.
func DialTCP(addr string) (*Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c.(*net.TCPConn).SetNoDelay(true)
	return NewConn(c, "tcp:"+addr)
}
