package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"sync"
)

// snapshotChunk is how many intents one worker encodes or decodes at a
// time when a snapshot is written or restored in parallel, unless their
// payloads, results and trails (or their encodings) pass
// snapshotChunkBytes first: the pipeline holds about three chunks per
// worker, so large records must not make a chunk large.
const (
	snapshotChunk      = 1024
	snapshotChunkBytes = 4 << 20
)

// snapshotWorkers is how many goroutines encode or decode snapshot records.
func snapshotWorkers() int { return max(1, runtime.GOMAXPROCS(0)) }

// pipeline runs produce on one goroutine, work on each job it sends on
// `workers` goroutines, and consume on the caller's goroutine in the order
// the jobs were sent. After consume fails, send returns false and the
// remaining jobs are worked but not consumed. It returns consume's first
// error, else produce's.
func pipeline[J any](workers int, produce func(send func(J) bool) error, work func(J), consume func(J) error) error {
	type slot struct {
		job  J
		done chan struct{}
	}
	jobs := make(chan *slot, workers)
	order := make(chan *slot, 2*workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range jobs {
				work(s.job)
				close(s.done)
			}
		}()
	}
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		defer close(order)
		defer close(jobs)
		produced <- produce(func(j J) bool {
			s := &slot{job: j, done: make(chan struct{})}
			select {
			case order <- s:
			case <-stop:
				return false
			}
			jobs <- s
			return true
		})
	}()
	var err error
	for s := range order {
		<-s.done
		if err == nil {
			if err = consume(s.job); err != nil {
				close(stop)
			}
		}
	}
	wg.Wait()
	if perr := <-produced; err == nil {
		err = perr
	}
	return err
}

// encodeJob is one chunk of stored records and, once encoded, their
// views.
type encodeJob struct {
	raws [][]byte
	buf  *bytes.Buffer
	err  error
}

// encodeBufs recycles chunk buffers: growing a fresh buffer for every
// chunk cost more than the encoding itself.
var encodeBufs = sync.Pool{New: func() any {
	b := new(bytes.Buffer)
	b.Grow(snapshotChunk * 512)
	return b
}}

// writeRecords writes one frame per record in key order: a 4-byte
// big-endian length and the record's encoding, which is what the store
// holds (nothing is decoded or encoded).
func (l *Machine) writeRecords(w *bufio.Writer) error {
	var err error
	var size [4]byte
	p := []byte{tableRecord}
	l.r().Scan(p, prefixEnd(p), func(k, v []byte) bool {
		if len(v) > maxRecordFrame {
			ns, key, _ := parseNS(k[1:])
			err = fmt.Errorf("%w: intent %s/%s encodes to %d bytes, over the frame limit of %d",
				ErrUnsnapshottable, ns, key, len(v), maxRecordFrame)
			return false
		}
		binary.BigEndian.PutUint32(size[:], uint32(len(v)))
		if _, err = w.Write(size[:]); err == nil {
			_, err = w.Write(v)
		}
		return err == nil
	})
	return err
}

// writeIntentLines writes one JSON line per intent in key order, without
// HTML escaping: the intents of a JSON dump (WriteSnapshotJSON).
func (l *Machine) writeIntentLines(w *bufio.Writer) error {
	return l.writeChunks(w, func(buf *bytes.Buffer, raw []byte) error {
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		return enc.Encode(decodeStored(raw).intent())
	})
}

// writeChunks encodes the stored records in key order with encode, chunks
// concurrently, and writes the chunks in order, so the bytes are exactly
// those of encoding the records one by one.
func (l *Machine) writeChunks(w *bufio.Writer, encode func(*bytes.Buffer, []byte) error) error {
	return pipeline(snapshotWorkers(),
		func(send func(*encodeJob) bool) error {
			chunk := make([][]byte, 0, snapshotChunk)
			size := 0
			ok := true
			p := []byte{tableRecord}
			l.r().Scan(p, prefixEnd(p), func(_, v []byte) bool {
				chunk = append(chunk, bytes.Clone(v))
				size += len(v)
				if len(chunk) == snapshotChunk || size >= snapshotChunkBytes {
					ok = send(&encodeJob{raws: chunk})
					chunk, size = make([][]byte, 0, snapshotChunk), 0
				}
				return ok
			})
			if ok && len(chunk) > 0 {
				send(&encodeJob{raws: chunk})
			}
			return nil
		},
		func(j *encodeJob) {
			j.buf = encodeBufs.Get().(*bytes.Buffer)
			for _, raw := range j.raws {
				if j.err = encode(j.buf, raw); j.err != nil {
					return
				}
			}
		},
		func(j *encodeJob) error {
			err := j.err
			if err == nil {
				_, err = w.Write(j.buf.Bytes())
			}
			if j.buf.Cap() <= 2*snapshotChunkBytes { // a chunk with one huge record is not kept
				j.buf.Reset()
				encodeBufs.Put(j.buf)
			}
			return err
		})
}

// decodeJob is one chunk of a snapshot's intents or audit log events:
// their encodings (record frames or event lines) and, once decoded, their
// values.
type decodeJob[T any] struct {
	first  int // position of the first element in the snapshot
	raw    [][]byte
	values []T
	err    error
}

// readChunks reads count elements (what names them in errors: "intent",
// "audit event"), chunk by chunk, with read (which feeds every byte to
// the snapshot's hash), decodes the chunks concurrently with decode and
// hands the values to put in snapshot order.
func readChunks[T any](what string, count int, read func(i int) ([]byte, error), decode func(raw []byte) (T, error),
	put func(i int, v T) error) error {
	return pipeline(snapshotWorkers(),
		func(send func(*decodeJob[T]) bool) error {
			for first := 0; first < count; {
				n := min(snapshotChunk, count-first)
				j := &decodeJob[T]{first: first, raw: make([][]byte, 0, n)}
				for size := 0; len(j.raw) < n && size < snapshotChunkBytes; {
					raw, err := read(first + len(j.raw))
					if err != nil {
						return fmt.Errorf("%w: %s %d: %w", ErrBadSnapshot, what, first+len(j.raw), err)
					}
					j.raw = append(j.raw, raw)
					size += len(raw)
				}
				first += len(j.raw)
				if !send(j) {
					return nil
				}
			}
			return nil
		},
		func(j *decodeJob[T]) {
			j.values = make([]T, 0, len(j.raw))
			for k, raw := range j.raw {
				v, err := decode(raw)
				if err != nil {
					j.err = fmt.Errorf("%w: %s %d: %w", ErrBadSnapshot, what, j.first+k, err)
					break
				}
				j.values = append(j.values, v)
			}
			j.raw = nil
		},
		func(j *decodeJob[T]) error {
			if j.err != nil {
				return j.err
			}
			for k, v := range j.values {
				if err := put(j.first+k, v); err != nil {
					return err
				}
			}
			return nil
		})
}

// frameReader reads record frames from br, one per call, feeding every
// byte to h.
func frameReader(br *bufio.Reader, h hash.Hash) func(int) ([]byte, error) {
	var size [4]byte
	return func(int) ([]byte, error) {
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return nil, unexpectedEOF(err)
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > maxRecordFrame {
			return nil, fmt.Errorf("record of %d bytes is over the limit of %d", n, maxRecordFrame)
		}
		frame, err := readFrame(br, int(n))
		if err != nil {
			return nil, unexpectedEOF(err)
		}
		h.Write(size[:])
		h.Write(frame)
		return frame, nil
	}
}

// checked is decode followed by check, so that a record's values are
// checked on the goroutine that decoded it, in parallel with the others.
func checked(decode func([]byte) (*record, error), check func(*record) error) func([]byte) (*record, error) {
	return func(raw []byte) (*record, error) {
		r, err := decode(raw)
		if err != nil {
			return nil, err
		}
		if err := check(r); err != nil {
			return nil, err
		}
		return r, nil
	}
}

// readRecords reads count record frames, checks each record with check
// and hands them to put in order.
func readRecords(br *bufio.Reader, h hash.Hash, count int, check func(*record) error, put func(i int, r *record) error) error {
	return readChunks("intent", count, frameReader(br, h), checked(decodeRecord, check), put)
}

// eagerFrame is the largest frame read into one allocation of its
// claimed size; a larger one grows as its bytes arrive.
const eagerFrame = 1 << 20

// readFrame reads the next n bytes of br.
func readFrame(br *bufio.Reader, n int) ([]byte, error) {
	if n <= eagerFrame {
		frame := make([]byte, n)
		_, err := io.ReadFull(br, frame)
		return frame, err
	}
	var frame bytes.Buffer
	frame.Grow(eagerFrame)
	if _, err := io.CopyN(&frame, br, int64(n)); err != nil {
		return nil, err
	}
	return frame.Bytes(), nil
}

// chainEventLine is an audit log event line decoded, its hash verified,
// and its body decoded.
type chainEventLine struct {
	snapshotEvent
	body *ChainBody
}

// readEvents reads count audit log event lines, decodes them and checks
// their hashes concurrently, and hands them to put in order.
func readEvents(br *bufio.Reader, h hash.Hash, count int, put func(i int, e chainEventLine) error) error {
	read := func(int) ([]byte, error) { return readLine(br, h) }
	return readChunks("audit event", count, read, decodeEventLine, put)
}

// decodeEventLine decodes an audit log event line and its body, and
// verifies its hash.
func decodeEventLine(line []byte) (chainEventLine, error) {
	e := chainEventLine{snapshotEvent: snapshotEvent{ChainEvent: new(ChainEvent)}}
	if err := json.Unmarshal(line, &e.snapshotEvent); err != nil {
		return e, err
	}
	if ChainEventHash(e.Body) != e.Hash {
		return e, fmt.Errorf("event %d of %q does not hash to its hash", e.Seq, e.Namespace)
	}
	var err error
	e.body, err = decodeChainBody(e.Namespace, e.ChainEvent)
	return e, err
}

// unexpectedEOF is err, with a clean end of input named for what it is
// inside a snapshot: a truncation.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
