//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package loadgen

import "net"

// peerClosed cannot peek on this platform: a connection closed while idle
// is found when the request on it fails.
func peerClosed(net.Conn) bool { return false }
