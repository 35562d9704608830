//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package loadgen

import (
	"net"
	"syscall"
)

// peerClosed reports whether the server has closed nc, or sent something
// no request asked for, which makes the connection unusable too: a peek
// that does not wait finds the end of the stream (or data) instead of
// nothing to read yet.
func peerClosed(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = rerr != syscall.EAGAIN && rerr != syscall.EWOULDBLOCK && rerr != syscall.EINTR
		return true
	})
	return err != nil || closed
}
