package exporter

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/flate"
)

// A gzipped /metrics answer is one gzip member made of two deflate parts:
// the page's, compressed once per snapshot and shared by the scrapes of
// that snapshot, and each scrape's extra families. RFC 1952 lets a file
// hold several members, but not every reader goes past the first: curl
// 7.88 (Debian 12's) stops there with "Failed reading the chunked-encoded
// stream". So the page is deflated with a sync flush (byte-aligned, no
// final block), a scrape's extra families are deflated after it by a
// compressor of their own, ending in the final block, and the member's
// trailer carries the CRC-32 and length of both parts together. A deflate
// stream is a sequence of blocks, and the second compressor refers only
// to its own bytes, so the two parts decode as one stream.

// gzipHeader starts a member: no name, no time, the fastest compression
// (XFL 4), operating system unknown.
var gzipHeader = [10]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 255}

// deflatedPart is the shared first part of a member.
type deflatedPart struct {
	deflate bytes.Buffer // raw deflate, sync-flushed: no final block
	crc     uint32       // CRC-32 of the uncompressed bytes
	size    uint32       // their length, mod 2^32 (as the trailer has it)
}

func (d *deflatedPart) reset() {
	d.deflate.Reset()
	d.crc, d.size = 0, 0
}

// deflatePart fills d with what write writes.
func (h *textHandler) deflatePart(d *deflatedPart, write func(io.Writer) error) {
	d.reset()
	fw := h.flates.Get().(*flate.Writer)
	fw.Reset(&d.deflate)
	cw := checksumWriter{w: fw}
	_ = write(&cw) // writes to a bytes.Buffer cannot fail
	_ = fw.Flush()
	h.flates.Put(fw)
	d.crc, d.size = cw.crc, cw.size
}

// writeMember writes one gzip member: first, then tail.
func (h *textHandler) writeMember(w io.Writer, first *deflatedPart, tail []byte) {
	_, _ = w.Write(gzipHeader[:])
	_, _ = w.Write(first.deflate.Bytes())
	fw := h.flates.Get().(*flate.Writer)
	fw.Reset(w)
	_, _ = fw.Write(tail)
	_ = fw.Close()
	h.flates.Put(fw)
	var trailer [8]byte
	binary.LittleEndian.PutUint32(trailer[:4], crc32.Update(first.crc, crc32.IEEETable, tail))
	binary.LittleEndian.PutUint32(trailer[4:], first.size+uint32(len(tail)))
	_, _ = w.Write(trailer[:])
}

// checksumWriter passes writes on to w, keeping their CRC-32 and length.
type checksumWriter struct {
	w    io.Writer
	crc  uint32
	size uint32
}

func (c *checksumWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, crc32.IEEETable, p[:n])
	c.size += uint32(n)
	return n, err
}

// newFlateWriter makes a compressor at BestSpeed: on loopback or a LAN the
// CPU is dearer than the bytes.
func newFlateWriter() *flate.Writer {
	fw, _ := flate.NewWriter(io.Discard, flate.BestSpeed) // a valid level cannot fail
	return fw
}
