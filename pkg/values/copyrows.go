package values

import (
	"encoding/binary"
	"io"
	"math"
)

// A history import streams millions of rows into COPY twice (the staging table and the
// tiler's). pgx's CopyFrom encodes each value of each row through its type map, an
// interface and a plan lookup per value: a quarter of the server's CPU in an import
// (pprof, 2 M rows). The staged rows have five fixed columns, so they are written in
// PostgreSQL's binary COPY format here instead, which is small and stable: a header,
// per row a field count and each field's length and bytes (big-endian), a trailer.

// copyHeader starts a binary COPY stream: the signature, no flags, no extension.
var copyHeader = []byte("PGCOPY\n\377\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copyChunk is how many bytes of rows a Read prepares at once (pgconn sends 64 KiB).
const copyChunk = 60 << 10

// y2kMicros is 2000-01-01T00:00:00Z in microseconds since 1970, the epoch of
// PostgreSQL's binary timestamptz.
const y2kMicros = 946_684_800_000_000

// copyRows is an io.Reader of a binary COPY stream: next appends the next row (with
// appendInt8 and the others) and reports false at the end, or an error that ends the
// stream (the COPY then fails with it).
type copyRows struct {
	next func(buf []byte) ([]byte, bool, error)
	buf  []byte
	off  int
	done bool
	err  error
}

func newCopyRows(next func(buf []byte) ([]byte, bool, error)) *copyRows {
	return &copyRows{next: next, buf: append(make([]byte, 0, copyChunk+1024), copyHeader...)}
}

func (r *copyRows) Read(p []byte) (int, error) {
	for r.off == len(r.buf) {
		if r.done {
			if r.err != nil {
				return 0, r.err
			}
			return 0, io.EOF
		}
		r.fill()
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// fill prepares the next chunk of rows (after the header, on the first call), and the
// trailer after the last.
func (r *copyRows) fill() {
	if r.off > 0 {
		r.buf, r.off = r.buf[:0], 0
	}
	for len(r.buf) < copyChunk {
		buf, more, err := r.next(r.buf)
		if err != nil || !more {
			r.done, r.err = true, err
			if err == nil {
				r.buf = binary.BigEndian.AppendUint16(r.buf, 0xffff) // the trailer: -1
			}
			return
		}
		r.buf = buf
	}
}

// appendFields starts a row of n fields.
func appendFields(b []byte, n int) []byte { return binary.BigEndian.AppendUint16(b, uint16(n)) }

func appendInt8(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(b, 8), uint64(v))
}

func appendInt4(b []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(b, 4), uint32(v))
}

func appendFloat8(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(b, 8), math.Float64bits(v))
}

// appendTimestamptz appends a timestamp in ms since 1970 (within the store's range).
func appendTimestamptz(b []byte, ms int64) []byte { return appendInt8(b, ms*1000-y2kMicros) }

// appendJSONB appends JSON text as jsonb (format version 1), nil as NULL.
func appendJSONB(b []byte, text []byte) []byte {
	if text == nil {
		return binary.BigEndian.AppendUint32(b, 0xffffffff) // NULL: length -1
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(text)+1))
	return append(append(b, 1), text...)
}
