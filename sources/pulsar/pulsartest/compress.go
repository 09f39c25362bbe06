package pulsartest

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
)

// Compression types (MessageMetadata.compression).
const (
	compressNone = 0
	compressLZ4  = 1
	compressZLIB = 2
)

// errCompression is wrapped when a compressed entry cannot be decoded.
var errCompression = errors.New("pulsartest: cannot decompress")

// decompress returns the uncompressed payload of an entry for Messages. The
// broker itself never needs it: entries are pushed to consumers as stored.
// LZ4 (the block format Pulsar uses, which pulsar-client-go's DLQ and retry
// producers pick by default) and ZLIB are supported.
func decompress(kind uint64, payload []byte, size int) ([]byte, error) {
	switch kind {
	case compressNone:
		return payload, nil
	case compressLZ4:
		return lz4Block(payload, size)
	case compressZLIB:
		if size < 0 || size > maxMessageSize {
			return nil, fmt.Errorf("%w: zlib size %d", errCompression, size)
		}
		r, err := zlib.NewReader(bytes.NewReader(payload))
		if err != nil {
			return nil, fmt.Errorf("%w: zlib: %v", errCompression, err)
		}
		out := make([]byte, 0, size)
		buf := bytes.NewBuffer(out)
		if _, err := io.Copy(buf, io.LimitReader(r, int64(maxMessageSize)+1)); err != nil {
			return nil, fmt.Errorf("%w: zlib: %v", errCompression, err)
		}
		return buf.Bytes(), nil
	default:
		return nil, fmt.Errorf("%w: compression type %d", errCompression, kind)
	}
}

// lz4Block decodes one raw LZ4 block of known decompressed size.
func lz4Block(src []byte, size int) ([]byte, error) {
	if size < 0 || size > maxMessageSize {
		return nil, fmt.Errorf("%w: lz4 size %d", errCompression, size)
	}
	dst := make([]byte, 0, size)
	bad := fmt.Errorf("%w: corrupt lz4 block", errCompression)
	readLen := func(i, n int) (int, int, bool) {
		if n != 15 {
			return i, n, true
		}
		for {
			if i >= len(src) {
				return i, n, false
			}
			b := src[i]
			i++
			n += int(b)
			if b != 255 {
				return i, n, true
			}
		}
	}
	for i := 0; i < len(src); {
		token := src[i]
		i++
		var lit int
		var ok bool
		if i, lit, ok = readLen(i, int(token>>4)); !ok || lit > len(src)-i || len(dst)+lit > size {
			return nil, bad
		}
		dst = append(dst, src[i:i+lit]...)
		i += lit
		if i == len(src) {
			break
		}
		if i+2 > len(src) {
			return nil, bad
		}
		off := int(src[i]) | int(src[i+1])<<8
		i += 2
		if off == 0 || off > len(dst) {
			return nil, bad
		}
		var ml int
		if i, ml, ok = readLen(i, int(token&15)); !ok {
			return nil, bad
		}
		ml += 4
		if len(dst)+ml > size {
			return nil, bad
		}
		start := len(dst) - off
		for j := range ml {
			dst = append(dst, dst[start+j])
		}
	}
	if len(dst) != size {
		return nil, bad
	}
	return dst, nil
}
