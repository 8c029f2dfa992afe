package fsm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash"
	"runtime"
	"sync"
)

// snapshotChunk is how many intents one worker encodes or decodes at a
// time when a snapshot is written or restored in parallel.
const snapshotChunk = 1024

// snapshotWorkers is how many goroutines encode or decode snapshot lines.
func snapshotWorkers() int { return max(1, runtime.GOMAXPROCS(0)) }

// encodeJob is one chunk of intents and, once encoded, their lines.
type encodeJob struct {
	intents []*Intent
	buf     *bytes.Buffer
	err     error
	done    chan struct{}
}

// encodeBufs recycles chunk buffers: growing a fresh buffer line by line
// for every chunk cost more than the encoding itself.
var encodeBufs = sync.Pool{New: func() any {
	b := new(bytes.Buffer)
	b.Grow(snapshotChunk * 1024)
	return b
}}

// writeIntents writes one JSON line per intent in key order. Chunks are
// encoded concurrently, each with its own json.Encoder configured as the
// sequential writer was (no HTML escaping), and written in order, so the
// bytes are exactly those of encoding them one by one.
func (l *Ledger) writeIntents(w *bufio.Writer) error {
	workers := snapshotWorkers()
	jobs := make(chan *encodeJob, workers)
	order := make(chan *encodeJob, 2*workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.buf = encodeBufs.Get().(*bytes.Buffer)
				enc := json.NewEncoder(j.buf)
				enc.SetEscapeHTML(false)
				for _, in := range j.intents {
					if j.err = enc.Encode(in); j.err != nil {
						break
					}
				}
				close(j.done)
			}
		}()
	}
	stop := make(chan struct{})
	go func() {
		defer close(order)
		defer close(jobs)
		chunk := make([]*Intent, 0, snapshotChunk)
		send := func() bool {
			j := &encodeJob{intents: chunk, done: make(chan struct{})}
			select {
			case order <- j:
			case <-stop:
				return false
			}
			jobs <- j
			chunk = make([]*Intent, 0, snapshotChunk)
			return true
		}
		ok := true
		l.intents.Ascend(func(in *Intent) bool {
			chunk = append(chunk, in)
			if len(chunk) == snapshotChunk {
				ok = send()
			}
			return ok
		})
		if ok && len(chunk) > 0 {
			send()
		}
	}()
	var err error
	for j := range order {
		<-j.done
		if err == nil {
			err = j.err
		}
		if err == nil {
			_, err = w.Write(j.buf.Bytes())
		}
		j.buf.Reset()
		encodeBufs.Put(j.buf)
		if err != nil {
			select {
			case <-stop:
			default:
				close(stop)
			}
		}
	}
	wg.Wait()
	return err
}

// decodeJob is one chunk of snapshot lines and, once decoded, their
// intents.
type decodeJob struct {
	first   int // position of the first line among the intents
	lines   [][]byte
	intents []*Intent
	err     error
	done    chan struct{}
}

// readIntents reads count intent lines (feeding every byte to h in order)
// and decodes them concurrently; put receives them in snapshot order.
func readIntents(br *bufio.Reader, h hash.Hash, count int, put func(i int, in *Intent) error) error {
	workers := snapshotWorkers()
	jobs := make(chan *decodeJob, workers)
	order := make(chan *decodeJob, 2*workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.intents = make([]*Intent, len(j.lines))
				for k, line := range j.lines {
					in := new(Intent)
					if err := json.Unmarshal(line, in); err != nil {
						j.err = fmt.Errorf("%w: intent %d: %w", ErrBadSnapshot, j.first+k, err)
						break
					}
					j.intents[k] = in
				}
				j.lines = nil
				close(j.done)
			}
		}()
	}
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		defer close(order)
		defer close(jobs)
		for first := 0; first < count; first += snapshotChunk {
			n := min(snapshotChunk, count-first)
			j := &decodeJob{first: first, lines: make([][]byte, 0, n), done: make(chan struct{})}
			for k := 0; k < n; k++ {
				line, err := readLine(br, h)
				if err != nil {
					readErr <- fmt.Errorf("%w: intent %d: %w", ErrBadSnapshot, first+k, err)
					return
				}
				j.lines = append(j.lines, line)
			}
			select {
			case order <- j:
			case <-stop:
				return
			}
			jobs <- j
		}
	}()
	var err error
	for j := range order {
		<-j.done
		if err == nil {
			err = j.err
		}
		for k := 0; err == nil && k < len(j.intents); k++ {
			err = put(j.first+k, j.intents[k])
		}
		if err != nil {
			select {
			case <-stop:
			default:
				close(stop)
			}
		}
	}
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err := <-readErr:
		return err
	default:
	}
	return nil
}
