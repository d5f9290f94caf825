//go:build cgo

package nvmlbackend

/*
#cgo LDFLAGS: -ldl
// RTLD_DEFAULT is a GNU extension: older glibc headers (the release's Debian 11
// build root) declare it only with _GNU_SOURCE.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdlib.h>

// gw_nvml_symbol finds a function of the libnvidia-ml.so.1 that go-nvml
// loaded (RTLD_GLOBAL); NULL when the library lacks it.
static void *gw_nvml_symbol(const char *name) {
	return dlsym(RTLD_DEFAULT, name);
}
*/
import "C"

import (
	"reflect"
	"sync"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// A few C functions are called directly rather than through go-nvml,
// where go-nvml's wrapper retries ERROR_INSUFFICIENT_SIZE with no bound
// (process lists, retired pages). This file holds what those calls share:
// finding the function in the library go-nvml loaded, and the C handle
// inside one of go-nvml's device handles.

// nvmlFunction is a resolved C function; version is the index of its
// name in the list it was looked up by (0 the first choice).
type nvmlFunction struct {
	fn      unsafe.Pointer
	version int
}

var nvmlFunctions struct {
	mu    sync.Mutex
	found map[string]nvmlFunction // by the first name of the list
}

// lookupNVMLFunction resolves the first of names the library exports,
// once it is found; a library without any is asked again next time (it
// may not be loaded yet).
func lookupNVMLFunction(names ...string) (nvmlFunction, bool) {
	if len(names) == 0 {
		return nvmlFunction{}, false
	}
	p := &nvmlFunctions
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.found[names[0]]; ok {
		return f, true
	}
	for i, sym := range names {
		name := C.CString(sym)
		fn := C.gw_nvml_symbol(name)
		C.free(unsafe.Pointer(name))
		if fn != nil {
			f := nvmlFunction{fn: fn, version: i}
			if p.found == nil {
				p.found = map[string]nvmlFunction{}
			}
			p.found[names[0]] = f
			return f, true
		}
	}
	return nvmlFunction{}, false
}

// goNVMLHandle is the C handle inside one of go-nvml's own device handles
// (an unexported struct whose one field, Handle, is the nvmlDevice_t), or
// false for any other nvml.Device.
func goNVMLHandle(dev nvml.Device) (uintptr, bool) {
	v := reflect.ValueOf(dev)
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return 0, false
	}
	t := v.Type()
	if t.PkgPath() != "github.com/NVIDIA/go-nvml/pkg/nvml" || t.Name() != "nvmlDevice" {
		return 0, false
	}
	h := v.FieldByName("Handle")
	if !h.IsValid() || h.Kind() != reflect.Pointer {
		return 0, false
	}
	return h.Pointer(), true
}
