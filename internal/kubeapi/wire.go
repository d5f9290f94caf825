// Package kubeapi encodes and decodes the few protobuf messages gpuwatch
// exchanges with a kubelet (pod-resources v1 List) and a CRI runtime
// (runtime.v1 ContainerStatus and Version), with protowire, field by field:
// only the fields gpuwatch reads are kept, and unknown fields are skipped,
// as protobuf requires. The field numbers are those of the .proto files of
// k8s.io/kubelet/pkg/apis/podresources/v1 and k8s.io/cri-api/pkg/apis/runtime/v1;
// the tests check every message against those generated packages, both
// ways. (Why not the generated packages themselves: bench/RESULTS.md,
// "After the switch to grpc-go".)
package kubeapi

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// field is one field of a message as read: its bytes for a length-delimited
// field, its value for a varint.
type field struct {
	num    protowire.Number
	bytes  []byte
	varint uint64
}

// eachField calls f for every length-delimited and varint field of message
// b, in order; fields of other wire types are skipped.
func eachField(b []byte, f func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var fd field
		fd.num = num
		switch typ {
		case protowire.BytesType:
			fd.bytes, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			fd.varint, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(fd); err != nil {
			return err
		}
	}
	return nil
}

// decodeMessages decodes each occurrence of a repeated message field.
func decodeMessages[T any](fd field, out *[]T, decode func([]byte) (T, error)) error {
	v, err := decode(fd.bytes)
	if err != nil {
		return err
	}
	*out = append(*out, v)
	return nil
}

// appendString appends a string field; proto3 leaves an empty one out.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendMessage appends a message field.
func appendMessage(b []byte, num protowire.Number, message []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, message)
}

// appendVarint appends a varint field; proto3 leaves a zero out.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// stringMapEntry decodes an entry of a map<string, string> (key 1, value 2).
func stringMapEntry(b []byte) (key, value string, err error) {
	err = eachField(b, func(fd field) error {
		switch fd.num {
		case 1:
			key = string(fd.bytes)
		case 2:
			value = string(fd.bytes)
		}
		return nil
	})
	return key, value, err
}

func appendStringMap(b []byte, num protowire.Number, m map[string]string, keys []string) []byte {
	for _, k := range keys {
		var entry []byte
		entry = appendString(entry, 1, k)
		entry = appendString(entry, 2, m[k])
		b = appendMessage(b, num, entry)
	}
	return b
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
