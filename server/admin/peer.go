package admin

import (
	"net"

	"github.com/valyala/fasthttp"
)

// peer is who is on the other end of an admin connection, for the audit
// log: the kernel's SO_PEERCRED answer, taken at accept.
type peer struct {
	uid, pid int
	known    bool
}

// peerConn is an accepted connection with its peer.
type peerConn struct {
	net.Conn
	peer peer
}

// peerListener wraps the socket's listener to record each peer.
type peerListener struct{ net.Listener }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &peerConn{Conn: c, peer: peerCred(c)}, nil
}

// PeerAttrs are the log attributes naming who made the request: the
// dashboard's user (WithActor) or the socket's peer.
func PeerAttrs(ctx *fasthttp.RequestCtx) []any { return peerAttrs(ctx) }

// peerAttrs are the log attributes naming the request's peer.
func peerAttrs(ctx *fasthttp.RequestCtx) []any {
	if u := actor(ctx); u != "" {
		return []any{"user", u, "via", "dashboard"}
	}
	pc, ok := ctx.Conn().(*peerConn)
	if !ok || !pc.peer.known {
		return []any{"peer", "unknown"}
	}
	return []any{"peer_uid", pc.peer.uid, "peer_pid", pc.peer.pid}
}
