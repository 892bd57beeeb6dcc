package data

import (
	"archive/zip"
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/meshtrain/meshtrain/internal/inputfile"
)

// How a peer reads only its shard of a NumPy set. The images (x_train,
// x_test) are read row by row from the file, never whole: a .npy file,
// or a member stored uncompressed in a .npz (np.savez; a zip member's
// data sit at a known offset, read through an io.SectionReader), is read
// at the offset of each row the peer holds; a deflated member
// (np.savez_compressed) has no offsets, so it is streamed once, the rows
// of other peers decompressed and dropped. Either way a peer holds its
// rows and one row's buffer, not the array. The labels are read whole
// (one small array each). The test images are read whole: every peer
// evaluates on a share of them that the strategy, not the data, decides.

// rowReader reads the rows of one array: at offsets (ReaderAt) or in
// order (a stream).
type rowReader struct {
	at     io.ReaderAt // nil: stream
	base   int64       // the data's offset in at
	stream io.Reader
	pos    int // the next row of stream
}

// read fills dst with row i (rows are read in increasing order).
func (r *rowReader) read(i int, dst []byte) error {
	if r.at != nil {
		_, err := r.at.ReadAt(dst, r.base+int64(i)*int64(len(dst)))
		return err
	}
	if skip := int64(i-r.pos) * int64(len(dst)); skip > 0 {
		if _, err := io.CopyN(io.Discard, r.stream, skip); err != nil {
			return err
		}
	}
	r.pos = i + 1
	_, err := io.ReadFull(r.stream, dst)
	return err
}

// readNPYHead reads a .npy header from the start of r (a stream or at
// offset 0 of a ReaderAt), for an array of size bytes in all.
func readNPYHead(name string, r io.Reader, size int64, limit int) (*npyHead, error) {
	fixed := make([]byte, 12)
	k, err := io.ReadFull(r, fixed)
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	prefix, hlen, err := npyPrefix(name, fixed[:k])
	if err != nil {
		return nil, err
	}
	head := make([]byte, prefix+hlen)
	copy(head, fixed[:k])
	if k < len(head) {
		if _, err := io.ReadFull(r, head[k:]); err != nil {
			return nil, fmt.Errorf("%s: .npy header of %d bytes at byte offset %d: want at most %d, within the file's %d bytes (%w)", name, hlen, prefix, maxNPYHeader, size, err)
		}
	} else {
		head = fixed[:prefix+hlen] // a header shorter than 2 bytes: malformed below
	}
	return parseNPYHeader(name, head, size, limit)
}

// readRows reads the images array whose header is h from rr, keeping the
// rows shard holds (all for World ≤ 1). Bytes stay bytes, float32s are
// decoded, integers (token ids) become float32s, exact below 2^24.
func readRows(h *npyHead, rr *rowReader, shard Shard) error {
	a := h.a
	if len(a.shape) == 0 {
		return fmt.Errorf("%s: a scalar: want one row per example", a.name)
	}
	rows := a.shape[0]
	rowLen := 0
	if rows > 0 {
		rowLen = h.n / rows
	}
	held := rows
	if shard.World > 1 {
		held = ShardSize(rows, shard.World, shard.Rank)
	}
	if held*rowLen*h.dt.size > maxNPYBytes {
		return fmt.Errorf("%s: shape %v: this peer's %d rows are %d bytes, more than %d: use more peers", a.name, a.shape, held, held*rowLen*h.dt.size, maxNPYBytes)
	}
	raw := make([]byte, rowLen*h.dt.size)
	switch a.kind {
	case 'u':
		a.u8 = make([]uint8, 0, held*rowLen)
	default:
		a.f32 = make([]float32, 0, held*rowLen)
	}
	big := strings.HasPrefix(a.dtype, ">")
	for i := 0; i < rows; i++ {
		if !shard.Holds(i) {
			continue
		}
		if err := rr.read(i, raw); err != nil {
			return fmt.Errorf("%s: reading row %d of %v: %w (truncated or corrupt)", a.name, i, a.shape, err)
		}
		switch a.kind {
		case 'u':
			a.u8 = append(a.u8, raw...)
		case 'f':
			for j := 0; j < len(raw); j += 4 {
				u := binary.LittleEndian.Uint32(raw[j:])
				if big {
					u = binary.BigEndian.Uint32(raw[j:])
				}
				a.f32 = append(a.f32, math.Float32frombits(u))
			}
		default:
			for j := 0; j < len(raw); j += h.dt.size {
				v := intAt(a.dtype, raw[j:j+h.dt.size])
				if v > 1<<24 || v < -(1<<24) {
					return fmt.Errorf("%s: value %d at row %d: token ids and integer features must be within ±2^24 (they become float32 inputs)", a.name, v, i)
				}
				a.f32 = append(a.f32, float32(v))
			}
		}
	}
	return nil
}

// intAt decodes one integer of a listed dtype ("<i4", ">u2", "|i1" …).
func intAt(dtype string, b []byte) int64 {
	var bo binary.ByteOrder = binary.LittleEndian
	if dtype[0] == '>' {
		bo = binary.BigEndian
	}
	signed := dtype[1] == 'i'
	switch len(b) {
	case 1:
		if signed {
			return int64(int8(b[0]))
		}
		return int64(b[0])
	case 2:
		if signed {
			return int64(int16(bo.Uint16(b)))
		}
		return int64(bo.Uint16(b))
	case 4:
		if signed {
			return int64(int32(bo.Uint32(b)))
		}
		return int64(bo.Uint32(b))
	}
	u := bo.Uint64(b)
	if !signed && u > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(u)
}

// readNPZFile is ReadNPZ of path, reading only the training rows of
// ro.Shard.
func readNPZFile(path string, ro ReadOptions) (*ImageSet, error) {
	f, err := inputfile.Open(path) // a FIFO is refused, not waited on
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return readNPZShard(path, f, st.Size(), ro.Shard)
}

// readZipRows reads images member m of the archive in r (of path): at
// offsets if stored, streamed if deflated.
func readZipRows(path string, r io.ReaderAt, m *zip.File, shard Shard) (*npyArray, error) {
	name := path + ":" + m.Name
	size := int64(min(m.UncompressedSize64, math.MaxInt64))
	var rr rowReader
	var hr io.Reader
	switch m.Method {
	case zip.Store:
		off, err := m.DataOffset()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		sec := io.NewSectionReader(r, off, size)
		hr, rr.at = sec, sec
	case zip.Deflate:
		rc, err := m.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		defer rc.Close()
		hr = bufio.NewReaderSize(rc, 1<<16)
		rr.stream = hr
	default:
		return nil, fmt.Errorf("%s: zip compression method %d: want stored or deflated (np.savez, np.savez_compressed)", name, m.Method)
	}
	h, err := readNPYHead(name, hr, size, maxNPYBytes*max(1, shard.World)) // the rows held are checked again
	if err != nil {
		return nil, err
	}
	rr.base = int64(h.offset)
	if err := readRows(h, &rr, shard); err != nil {
		return nil, err
	}
	return h.a, nil
}

// readNPYRows reads the images file p, at the offsets of the rows shard
// holds.
func readNPYRows(p string, shard Shard) (*npyArray, error) {
	f, err := inputfile.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	h, err := readNPYHead(p, f, st.Size(), maxNPYBytes*max(1, shard.World))
	if err != nil {
		return nil, err
	}
	rr := rowReader{at: f, base: int64(h.offset)}
	if err := readRows(h, &rr, shard); err != nil {
		return nil, err
	}
	return h.a, nil
}

// npyFileDigest identifies a .npy file that peers read in shards: its
// size, header and a SHA-256 of its first and last MiB. A cheaper check
// than the pixels' digest (which each peer can no longer compute), it
// catches another file, not a change of a few pixels in its middle.
func npyFileDigest(p string) (string, error) {
	f, err := inputfile.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", st.Size())
	const part = 1 << 20
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, part)); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	if st.Size() > part {
		if _, err := io.Copy(h, io.NewSectionReader(f, max(part, st.Size()-part), part)); err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
	}
	return filepath.Base(p) + " " + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// readNPYDir is ReadNPYDir reading only the training rows of ro.Shard.
func readNPYDir(dir string, ro ReadOptions) (*ImageSet, error) {
	found, _ := filepath.Glob(filepath.Join(dir, "*.npy"))
	var keys []string
	for _, p := range found {
		keys = append(keys, strings.TrimSuffix(filepath.Base(p), ".npy"))
	}
	set, err := imagesFromArrays(dir, keys, func(key string) (*npyArray, error) {
		p := filepath.Join(dir, key+".npy")
		switch key {
		case kerasKeys[0]:
			return readNPYRows(p, ro.Shard)
		case kerasKeys[2]:
			return readNPYRows(p, Shard{})
		}
		b, err := inputfile.ReadFileMax(p, maxNPYBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return parseNPY(p, b)
	}, ro.Shard)
	if err != nil || ro.Shard.World <= 1 {
		return set, err
	}
	d, err := npyFileDigest(filepath.Join(dir, kerasKeys[0]+".npy"))
	if err != nil {
		return nil, err
	}
	set.Train.Digest = d
	return set, nil
}
