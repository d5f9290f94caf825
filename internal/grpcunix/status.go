package grpcunix

import (
	"errors"
	"strconv"
)

// Code is a gRPC status code (google.golang.org/grpc/codes).
type Code uint32

// The codes gpuwatch tells apart.
const (
	OK                Code = 0
	Canceled          Code = 1
	Unknown           Code = 2
	DeadlineExceeded  Code = 4
	NotFound          Code = 5
	PermissionDenied  Code = 7
	ResourceExhausted Code = 8
	Unimplemented     Code = 12
	Internal          Code = 13
	Unavailable       Code = 14
	Unauthenticated   Code = 16
)

var codeNames = map[Code]string{
	OK: "OK", Canceled: "Canceled", Unknown: "Unknown", DeadlineExceeded: "DeadlineExceeded",
	NotFound: "NotFound", PermissionDenied: "PermissionDenied", ResourceExhausted: "ResourceExhausted",
	Unimplemented: "Unimplemented", Internal: "Internal", Unavailable: "Unavailable",
	Unauthenticated: "Unauthenticated",
}

func (c Code) String() string {
	if name, ok := codeNames[c]; ok {
		return name
	}
	return "Code(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Status is a call that failed: the server's answer, or what the client
// saw. Its text is grpc-go's ("rpc error: code = NotFound desc = ...").
type Status struct {
	Code    Code
	Message string
	cause   error // the context's or the connection's error, if that was it
}

func (s *Status) Error() string {
	return "rpc error: code = " + s.Code.String() + " desc = " + s.Message
}

// Unwrap gives the context's error of a call past its deadline.
func (s *Status) Unwrap() error { return s.cause }

// CodeOf is err's code: OK for nil, Unknown for an error that is no Status.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	if st, ok := errors.AsType[*Status](err); ok {
		return st.Code
	}
	return Unknown
}

// Errorf is a Status for a handler to return.
func Errorf(code Code, message string) error {
	return &Status{Code: code, Message: message}
}
