package main

/*
#include <stdint.h>
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// C handles. NVML's handles (nvmlDevice_t, nvmlEventSet_t, ...) are
// opaque pointers that the caller keeps. cgo forbids handing C a Go
// pointer to keep, so a handle here is a small number (1, 2, ...) that
// indexes this registry; the caller never dereferences it. One object
// always gets the same number, so callers may compare handles.
type registry struct {
	mu   sync.Mutex
	objs []any
	ids  map[any]uintptr
}

var handles = registry{ids: map[any]uintptr{}}

func (r *registry) handle(obj any) C.uintptr_t {
	if obj == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.ids[obj]
	if !ok {
		r.objs = append(r.objs, obj)
		id = uintptr(len(r.objs))
		r.ids[obj] = id
	}
	return C.uintptr_t(id)
}

func (r *registry) get(h C.uintptr_t) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h == 0 || uintptr(h) > uintptr(len(r.objs)) {
		return nil
	}
	return r.objs[h-1]
}

func lookup[T any](h C.uintptr_t) (T, bool) {
	v, ok := handles.get(h).(T)
	return v, ok
}

const (
	success         = C.int(nvml.SUCCESS)
	invalidArgument = C.int(nvml.ERROR_INVALID_ARGUMENT)
	uninitialized   = C.int(nvml.ERROR_UNINITIALIZED)
	insufficient    = C.int(nvml.ERROR_INSUFFICIENT_SIZE)
)

// onDevice runs f with the device behind handle h: INVALID_ARGUMENT for
// a handle this library did not hand out, UNINITIALIZED before nvmlInit.
func onDevice(h C.uintptr_t, f func(nvml.Device) C.int) C.int { return onHandle(h, f) }

// onLib calls f with the simulator serving as the library, or answers
// UNINITIALIZED before nvmlInit, as NVML does.
func onLib(f func(nvml.Interface) C.int) C.int {
	l := lib()
	if l == nil {
		return uninitialized
	}
	return f(l)
}

// onHandle calls f with the simulator's handle of type T behind h, or
// answers as NVML does without a library or with a handle it never gave.
func onHandle[T any](h C.uintptr_t, f func(T) C.int) C.int {
	if lib() == nil {
		return uninitialized
	}
	v, ok := lookup[T](h)
	if !ok {
		return invalidArgument
	}
	return f(v)
}

// put stores v at p on success, as an NVML getter fills its out-parameter.
func put[T any](p unsafe.Pointer, v T, r nvml.Return) C.int {
	if r != nvml.SUCCESS {
		return C.int(r)
	}
	if p == nil {
		return invalidArgument
	}
	*(*T)(p) = v
	return success
}

// put2 stores two out-parameters.
func put2[T, U any](p unsafe.Pointer, v T, q unsafe.Pointer, w U, r nvml.Return) C.int {
	if r != nvml.SUCCESS {
		return C.int(r)
	}
	if p == nil || q == nil {
		return invalidArgument
	}
	*(*T)(p) = v
	*(*U)(q) = w
	return success
}

// putHandle stores a handle out-parameter (nvmlDevice_t *device).
func putHandle(p unsafe.Pointer, obj any, r nvml.Return) C.int {
	if r != nvml.SUCCESS {
		return C.int(r)
	}
	if p == nil {
		return invalidArgument
	}
	*(*C.uintptr_t)(p) = handles.handle(obj)
	return success
}

// putHandles writes the handles of objs into a caller's array, as putList
// writes items.
func putHandles[T any](countp unsafe.Pointer, arr unsafe.Pointer, objs []T, r nvml.Return) C.int {
	hs := make([]C.uintptr_t, len(objs))
	for i, obj := range objs {
		hs[i] = handles.handle(obj)
	}
	return putList(countp, arr, hs, r)
}

// putString copies s into a caller's buffer of length bytes, NUL
// terminated: INSUFFICIENT_SIZE when it does not fit, as NVML answers.
func putString(buf unsafe.Pointer, length C.uint, s string, r nvml.Return) C.int {
	if r != nvml.SUCCESS {
		return C.int(r)
	}
	if buf == nil {
		return invalidArgument
	}
	if uint(len(s))+1 > uint(length) {
		return insufficient
	}
	b := unsafe.Slice((*byte)(buf), int(length))
	copy(b, s)
	b[len(s)] = 0
	return success
}

// putList copies items into a caller's array whose capacity *count says:
// INSUFFICIENT_SIZE with *count set to what is needed when it is too
// small (or the array is NULL), as NVML's list calls answer.
func putList[T any](countp unsafe.Pointer, arr unsafe.Pointer, items []T, r nvml.Return) C.int {
	if r != nvml.SUCCESS {
		return C.int(r)
	}
	if countp == nil {
		return invalidArgument
	}
	count := (*C.uint)(countp)
	capacity := int(*count)
	*count = C.uint(len(items))
	if len(items) == 0 {
		return success
	}
	if arr == nil || capacity < len(items) {
		return insufficient
	}
	copy(unsafe.Slice((*T)(arr), len(items)), items)
	return success
}

// goString reads a NUL-terminated C string argument.
func goString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	return C.GoString((*C.char)(p))
}

// errorStrings holds nvmlErrorString's answers: C memory, kept for the
// life of the process like NVML's static strings.
var errorStrings sync.Map // nvml.Return -> *C.char
