package server

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter caps the connections the server holds open. Past the cap, a
// new connection first evicts the connection that has been idle the
// longest: a keep-alive connection costs its client only a reconnect,
// while refusing the newcomer could lock Prometheus out behind a crowd of
// idle clients. A connection that has not sent its request within
// stalledAfter is evicted likewise (slowloris). Only when every connection
// is busy is the newcomer closed.
//
// It works through http.Server.ConnState, so it applies whatever listener
// exporter-toolkit opens (TCP, vsock, systemd sockets) and before any TLS
// handshake.
type connLimiter struct {
	max int

	mu    sync.Mutex
	conns map[net.Conn]connInfo
}

type connInfo struct {
	state http.ConnState
	since time.Time // when it entered state
}

// stalledAfter is how long a new connection may take to send its request
// before it can be evicted in favour of another.
const stalledAfter = time.Second

func newConnLimiter(max int) *connLimiter {
	return &connLimiter{max: max, conns: make(map[net.Conn]connInfo)}
}

// track is the server's ConnState hook.
func (l *connLimiter) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	var evict net.Conn
	switch state {
	case http.StateNew:
		if len(l.conns) >= l.max {
			evict = l.evictable(time.Now())
			if evict == nil {
				l.mu.Unlock()
				_ = c.Close() // its StateClosed comes through here, untracked
				return
			}
			delete(l.conns, evict)
		}
		l.conns[c] = connInfo{state: state, since: time.Now()}
	case http.StateIdle, http.StateActive:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connInfo{state: state, since: time.Now()}
		}
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	}
	l.mu.Unlock()
	if evict != nil {
		_ = evict.Close()
	}
}

// evictable is the connection idle the longest or, when none is idle, the
// one stalled the longest before sending a request; nil when every one is
// busy. Called with l.mu held.
func (l *connLimiter) evictable(now time.Time) net.Conn {
	var idle, stalled net.Conn
	var idleSince, stalledSince time.Time
	for c, info := range l.conns {
		switch {
		case info.state == http.StateIdle && (idle == nil || info.since.Before(idleSince)):
			idle, idleSince = c, info.since
		case info.state == http.StateNew && now.Sub(info.since) >= stalledAfter && (stalled == nil || info.since.Before(stalledSince)):
			stalled, stalledSince = c, info.since
		}
	}
	if idle != nil {
		return idle
	}
	return stalled
}

// open is how many connections are tracked.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
