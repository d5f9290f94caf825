// Package grpcunix makes and serves unary gRPC calls over a unix socket with
// the standard library's HTTP/2 (cleartext, prior knowledge: what gRPC
// speaks on a local socket). The messages are encoded by the caller
// (internal/kubeapi, with protowire).
//
// gpuwatch makes two kinds of gRPC call, both unary and both local: the
// kubelet's pod-resources List and the CRI runtime's ContainerStatus (and
// Version, for doctor). grpc-go and the generated Kubernetes packages for
// them cost more private memory than gpuwatch's memory targets allow
// (bench/RESULTS.md, "After the switch to grpc-go"); this package is the
// part of gRPC those calls use.
// Tests run it against grpc-go servers built from the real generated
// packages, and grpc-go clients against its server.
package grpcunix

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Conn is a client of one unix socket. Nothing is dialled until the first
// call; a connection is kept for the next calls and redialled when lost.
type Conn struct {
	path    string
	maxRecv int
	client  *http.Client
	tr      *http.Transport
	closed  atomic.Bool
}

// New returns a client of the socket at path. maxRecvBytes bounds one
// answer.
func New(path string, maxRecvBytes int) *Conn {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	var dialer net.Dialer
	tr := &http.Transport{
		Protocols: protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     5 * time.Minute,
	}
	return &Conn{path: path, maxRecv: maxRecvBytes, client: &http.Client{Transport: tr}, tr: tr}
}

// Close drops the kept connection; calls after Close fail.
func (c *Conn) Close() error {
	c.closed.Store(true)
	c.tr.CloseIdleConnections()
	return nil
}

// Invoke calls method ("/package.Service/Method") with the encoded request
// and returns the encoded answer. A failure of the call itself (no socket,
// no answer before ctx's deadline, a broken stream) is a *Status with code
// Unavailable or DeadlineExceeded, as grpc-go reports it; an error the
// server answered is a *Status with its code and message.
func (c *Conn) Invoke(ctx context.Context, method string, request []byte) ([]byte, error) {
	if c.closed.Load() {
		return nil, &Status{Code: Canceled, Message: "the client connection is closed"}
	}
	body := make([]byte, 5+len(request))
	binary.BigEndian.PutUint32(body[1:5], uint32(len(request)))
	copy(body[5:], request)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+method, bytes.NewReader(body))
	if err != nil {
		return nil, &Status{Code: Internal, Message: err.Error()}
	}
	req.Header.Set("Content-Type", "application/grpc+proto")
	req.Header.Set("Te", "trailers")
	if deadline, ok := ctx.Deadline(); ok {
		req.Header.Set("Grpc-Timeout", encodeTimeout(time.Until(deadline)))
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, transportFailure(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &Status{Code: httpStatusCode(resp.StatusCode), Message: "unexpected HTTP status " + resp.Status}
	}
	// A trailers-only answer (an error) carries its status in the headers.
	if st := statusFrom(resp.Header); st != nil && st.Code != OK {
		return nil, st
	}
	var prefix [5]byte
	var message []byte
	switch _, err := io.ReadFull(resp.Body, prefix[:]); {
	case err == io.EOF:
		// No message: the status in the trailers says why.
	case err != nil:
		return nil, transportFailure(ctx, err)
	default:
		if prefix[0] != 0 {
			return nil, &Status{Code: Internal, Message: "compressed answer, which was not asked for"}
		}
		n := binary.BigEndian.Uint32(prefix[1:])
		if int64(n) > int64(c.maxRecv) {
			return nil, &Status{Code: ResourceExhausted, Message: fmt.Sprintf("answer of %d bytes is larger than the %d allowed", n, c.maxRecv)}
		}
		message = make([]byte, n)
		if _, err := io.ReadFull(resp.Body, message); err != nil {
			return nil, transportFailure(ctx, err)
		}
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return nil, transportFailure(ctx, err)
	}
	st := statusFrom(resp.Trailer)
	if st == nil {
		st = statusFrom(resp.Header)
	}
	switch {
	case st == nil:
		return nil, &Status{Code: Internal, Message: "answer without grpc-status"}
	case st.Code != OK:
		return nil, st
	case message == nil:
		return nil, &Status{Code: Internal, Message: "answer without a message"}
	}
	return message, nil
}

// transportFailure is a call that did not get an answer: past its deadline,
// or no server (grpc-go calls both a status too).
func transportFailure(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		code := DeadlineExceeded
		if errors.Is(ctxErr, context.Canceled) {
			code = Canceled
		}
		return &Status{Code: code, Message: ctxErr.Error(), cause: ctxErr}
	}
	return &Status{Code: Unavailable, Message: err.Error(), cause: err}
}

func statusFrom(h http.Header) *Status {
	raw := h.Get("Grpc-Status")
	if raw == "" {
		return nil
	}
	code, err := strconv.ParseUint(raw, 10, 32)
	if err != nil {
		return &Status{Code: Unknown, Message: "malformed grpc-status " + strconv.Quote(raw)}
	}
	return &Status{Code: Code(code), Message: decodeMessage(h.Get("Grpc-Message"))}
}

// httpStatusCode maps an HTTP status to the gRPC code, as the gRPC spec's
// http-grpc-status-mapping.md says.
func httpStatusCode(status int) Code {
	switch status {
	case http.StatusBadRequest:
		return Internal
	case http.StatusUnauthorized:
		return Unauthenticated
	case http.StatusForbidden:
		return PermissionDenied
	case http.StatusNotFound:
		return Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Unavailable
	}
	return Unknown
}

// encodeTimeout writes d as grpc-timeout wants it: at most 8 digits and a
// unit.
func encodeTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	for _, u := range []struct {
		unit string
		d    time.Duration
	}{{"n", time.Nanosecond}, {"u", time.Microsecond}, {"m", time.Millisecond}, {"S", time.Second}, {"M", time.Minute}} {
		if v := (d + u.d - 1) / u.d; v < 1e8 {
			return strconv.FormatInt(int64(v), 10) + u.unit
		}
	}
	return strconv.FormatInt(int64(d/time.Hour)+1, 10) + "H"
}

// decodeMessage undoes grpc-message's percent-encoding.
func decodeMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// encodeMessage percent-encodes a grpc-message.
func encodeMessage(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
