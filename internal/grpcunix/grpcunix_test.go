package grpcunix

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

func serve(t *testing.T, methods map[string]Handler) string {
	t.Helper()
	path := filepath.Join(testenv.ShortTempDir(t), "s.sock")
	stop, err := Serve(path, methods)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return path
}

func TestInvokeRoundTripAndStatuses(t *testing.T) {
	path := serve(t, map[string]Handler{
		"/t.S/Echo":  func(_ context.Context, req []byte) ([]byte, error) { return append([]byte("echo:"), req...), nil },
		"/t.S/Empty": func(context.Context, []byte) ([]byte, error) { return []byte{}, nil },
		"/t.S/Fail": func(context.Context, []byte) ([]byte, error) {
			return nil, Errorf(NotFound, "container \"x\" not found: 100% gone\nreally")
		},
		"/t.S/Big": func(context.Context, []byte) ([]byte, error) { return make([]byte, 2048), nil },
	})
	c := New(path, 1024)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if got, err := c.Invoke(ctx, "/t.S/Echo", []byte("hi")); err != nil || string(got) != "echo:hi" {
		t.Errorf("Echo = %q, %v", got, err)
	}
	if got, err := c.Invoke(ctx, "/t.S/Empty", nil); err != nil || len(got) != 0 {
		t.Errorf("Empty = %q, %v: an empty message is a message", got, err)
	}
	_, err := c.Invoke(ctx, "/t.S/Fail", nil)
	var st *Status
	if !errors.As(err, &st) || st.Code != NotFound || st.Message != "container \"x\" not found: 100% gone\nreally" {
		t.Errorf("Fail: %#v", err)
	}
	if _, err := c.Invoke(ctx, "/t.S/Nope", nil); CodeOf(err) != Unimplemented {
		t.Errorf("unknown method: %v, want Unimplemented", err)
	}
	if _, err := c.Invoke(ctx, "/t.S/Big", nil); CodeOf(err) != ResourceExhausted {
		t.Errorf("answer over the limit: %v, want ResourceExhausted", err)
	}
	// The connection survives an error answer.
	if got, err := c.Invoke(ctx, "/t.S/Echo", bytes.Repeat([]byte("x"), 500)); err != nil || len(got) != 505 {
		t.Errorf("Echo after errors = %d bytes, %v", len(got), err)
	}
	c.Close()
	if _, err := c.Invoke(ctx, "/t.S/Echo", nil); CodeOf(err) != Canceled {
		t.Errorf("after Close: %v, want Canceled", err)
	}
}

func TestInvokeWithoutServerIsUnavailable(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "absent.sock"), 1024)
	defer c.Close()
	if _, err := c.Invoke(context.Background(), "/t.S/Echo", nil); CodeOf(err) != Unavailable {
		t.Errorf("absent socket: %v, want Unavailable", err)
	}
}

func TestEncodeTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:           "1n",
		1500 * time.Nanosecond: "1500n",
		time.Second:            "1000000u",
		2 * time.Minute:        "120000m",
		30 * 24 * time.Hour:    "2592000S",
	} {
		if got := encodeTimeout(d); got != want {
			t.Errorf("encodeTimeout(%v) = %q, want %q", d, got, want)
		}
	}
}
