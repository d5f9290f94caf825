package grpcunix

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Handler answers one method: the encoded request in, the encoded answer
// (or a *Status error) out.
type Handler func(ctx context.Context, request []byte) ([]byte, error)

// maxServerRecv bounds a request the server reads.
const maxServerRecv = 1 << 20

// Serve serves the methods (keyed "/package.Service/Method") on a new unix
// socket at path until stop is called. Other methods answer Unimplemented.
func Serve(path string, methods map[string]Handler) (stop func(), err error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           serverHandler(methods),
		Protocols:         protocols,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(l) }()
	return func() { _ = srv.Close() }, nil
}

func serverHandler(methods map[string]Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.ProtoMajor != 2 {
			http.Error(w, "gRPC needs HTTP/2 POST", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/grpc")
		// An error is a trailers-only answer: its status in the headers.
		fail := func(st *Status) {
			w.Header().Set("Grpc-Status", strconv.FormatUint(uint64(st.Code), 10))
			w.Header().Set("Grpc-Message", encodeMessage(st.Message))
			w.WriteHeader(http.StatusOK)
		}
		handler, ok := methods[r.URL.Path]
		if !ok {
			fail(&Status{Code: Unimplemented, Message: "unknown method " + r.URL.Path})
			return
		}
		var prefix [5]byte
		if _, err := io.ReadFull(r.Body, prefix[:]); err != nil {
			fail(&Status{Code: Internal, Message: "reading the request: " + err.Error()})
			return
		}
		n := binary.BigEndian.Uint32(prefix[1:])
		if prefix[0] != 0 || n > maxServerRecv {
			fail(&Status{Code: ResourceExhausted, Message: "request compressed or too large"})
			return
		}
		request := make([]byte, n)
		if _, err := io.ReadFull(r.Body, request); err != nil {
			fail(&Status{Code: Internal, Message: "reading the request: " + err.Error()})
			return
		}
		answer, err := handler(r.Context(), request)
		if err != nil {
			var st *Status
			if !errors.As(err, &st) {
				st = &Status{Code: Unknown, Message: err.Error()}
			}
			fail(st)
			return
		}
		w.Header().Set("Trailer", "Grpc-Status")
		w.WriteHeader(http.StatusOK)
		frame := make([]byte, 5+len(answer))
		binary.BigEndian.PutUint32(frame[1:5], uint32(len(answer)))
		copy(frame[5:], answer)
		_, _ = w.Write(frame)
		w.Header().Set("Grpc-Status", "0")
	})
}
