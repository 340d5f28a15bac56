package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// File names in the state dir: the current file, and the one before it
// once the current one outgrew Options.MaxSize.
const (
	FileName    = "journal.jsonl"
	OldFileName = "journal.1.jsonl"
)

// DefaultMaxSize bounds one file; with the one before it, the journal holds
// at most twice this.
const DefaultMaxSize = 4 << 20

// DefaultFlushDelay is how long the writer lets records gather after the
// first of a batch before it writes and fsyncs them.
const DefaultFlushDelay = 50 * time.Millisecond

// Options configure a Journal.
type Options struct {
	MaxSize int64 // rotate past this many bytes; 0 means DefaultMaxSize
	// FlushDelay is how long records gather before one write and one
	// fsync take them all; 0 means DefaultFlushDelay. A crash loses at
	// most the records of that window.
	FlushDelay time.Duration
	Now        func() time.Time // default time.Now
	Logger     *slog.Logger     // write failures; default slog.Default()
}

// Journal appends records to the journal files of one state dir. One
// goroutine, started by Open and ended by Close, owns the file: Append
// hands it a record and returns at once (it waits only when the writer is
// thousands of records behind: a record is never dropped). The writer
// wakes for the first record of a batch, lets the others gather for
// FlushDelay without waking for each, then writes them all with one write
// and one fsync: an instruction's records cost it a channel send, and the
// disk one flush per window however many instructions ran.
type Journal struct {
	dir     string
	maxSize int64
	now     func() time.Time
	log     *slog.Logger

	delay   time.Duration
	in      chan Record
	quit    chan struct{} // closed by Close: flush now, take no more
	done    chan struct{}
	once    sync.Once
	closing sync.RWMutex // Append sends under it; Close closes in under it

	// The writer's own: the file, its size, the chain's head.
	f    *os.File
	size int64
	seq  int64
	head string
	err  error // the first write failure, reported by Close
}

// queue is how many records may wait for the writer.
const queue = 4096

// Open opens (creating it, 0600) the journal in dir and starts its writer.
// A last line left half-written by a crash is cut off; the chain goes on
// from the last whole record.
func Open(dir string, opts Options) (*Journal, error) {
	j := &Journal{dir: dir, maxSize: opts.MaxSize, now: opts.Now, log: opts.Logger, delay: opts.FlushDelay,
		in: make(chan Record, queue), quit: make(chan struct{}), done: make(chan struct{})}
	if j.delay <= 0 {
		j.delay = DefaultFlushDelay
	}
	if j.maxSize <= 0 {
		j.maxSize = DefaultMaxSize
	}
	if j.now == nil {
		j.now = time.Now
	}
	if j.log == nil {
		j.log = slog.Default()
	}
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := j.resume(f); err != nil {
		f.Close()
		return nil, err
	}
	j.f = f
	go j.write()
	return j, nil
}

// resume reads f to its last whole record: the chain's head and the
// sequence number, from the file before it when f is empty.
func (j *Journal) resume(f *os.File) error {
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	whole := bytes.LastIndexByte(b, '\n') + 1
	if whole < len(b) {
		if err := f.Truncate(int64(whole)); err != nil {
			return fmt.Errorf("journal: cutting a half-written last line: %w", err)
		}
		j.log.Warn("journal: a half-written last record (an interrupted write) was cut off", "bytes", len(b)-whole)
	}
	if _, err := f.Seek(int64(whole), io.SeekStart); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.size = int64(whole)
	last := lastRecord(b[:whole])
	if last == nil {
		old, err := os.ReadFile(filepath.Join(j.dir, OldFileName))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("journal: %w", err)
		}
		last = lastRecord(old)
	}
	if last != nil {
		j.seq, j.head = last.Seq, last.Digest
	}
	return nil
}

// lastRecord is the last line of b that parses, nil when none does.
func lastRecord(b []byte) *Record {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		var r Record
		if len(lines[i]) > 0 && json.Unmarshal(lines[i], &r) == nil {
			return &r
		}
	}
	return nil
}

// Append queues r; the writer numbers it, stamps its time when it has none,
// and chains it.
func (j *Journal) Append(r Record) {
	if r.Time.IsZero() {
		r.Time = j.now()
	}
	j.closing.RLock()
	defer j.closing.RUnlock()
	select {
	case <-j.quit:
		j.log.Warn("journal: a record came after the journal was closed; it was not written", "event", r.Event, "instructionId", r.InstructionID)
	default:
		j.in <- r
	}
}

// Close writes what is queued, fsyncs, closes the file and stops the
// writer. It returns the first write failure, if any.
func (j *Journal) Close() error {
	j.once.Do(func() {
		close(j.quit) // the writer stops gathering and Append stops sending
		j.closing.Lock()
		close(j.in)
		j.closing.Unlock()
	})
	<-j.done
	return j.err
}

// write is the writer goroutine.
func (j *Journal) write() {
	defer close(j.done)
	defer func() {
		if err := j.f.Close(); err != nil && j.err == nil {
			j.err = err
		}
	}()
	var buf bytes.Buffer
	for r := range j.in {
		batch := []Record{r}
		j.gather()
	drain:
		for len(batch) < queue {
			select {
			case r, ok := <-j.in:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if err := j.writeBatch(&buf, batch); err != nil {
			if j.err == nil {
				j.err = err
			}
			j.log.Error("journal: records could not be written", "records", len(batch), "err", err)
		}
	}
}

// writeBatch writes the batch's records with one write and one fsync per
// file: once the file has reached its bound, what is pending is written,
// the file rotated, and the new file begins with a record that carries the
// chain over. A file so exceeds its bound by one record at most.
func (j *Journal) writeBatch(buf *bytes.Buffer, batch []Record) error {
	buf.Reset()
	for _, r := range batch {
		if j.size+int64(buf.Len()) >= j.maxSize {
			if err := j.flush(buf.Bytes()); err != nil {
				return err
			}
			buf.Reset()
			if err := j.rotate(); err != nil {
				return err
			}
			j.encode(buf, Record{Time: j.now(), Event: EventRotated})
		}
		j.encode(buf, r)
	}
	return j.flush(buf.Bytes())
}

// gather lets records pile up in the channel for the flush delay, or until
// Close, without waking the writer for each.
func (j *Journal) gather() {
	t := time.NewTimer(j.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-j.quit:
	}
}

// encode chains r onto the head and appends its line to buf.
func (j *Journal) encode(buf *bytes.Buffer, r Record) {
	j.seq++
	r.Seq, r.Time, r.Prev = j.seq, r.Time.UTC(), j.head
	r.Digest = Digest(r)
	j.head = r.Digest
	b, _ := json.Marshal(r)
	buf.Write(b)
	buf.WriteByte('\n')
}

// flush writes lines (whole records) and fsyncs.
func (j *Journal) flush(lines []byte) error {
	if len(lines) == 0 {
		return nil
	}
	n, err := j.f.Write(lines)
	j.size += int64(n)
	if err != nil {
		return err
	}
	return j.f.Sync()
}

// rotate moves the current file over the old one and starts a new one.
func (j *Journal) rotate() error {
	if err := j.f.Sync(); err != nil {
		return err
	}
	cur, old := filepath.Join(j.dir, FileName), filepath.Join(j.dir, OldFileName)
	if err := os.Rename(cur, old); err != nil {
		return err
	}
	f, err := os.OpenFile(cur, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	j.f.Close()
	j.f, j.size = f, 0
	if d, err := os.Open(j.dir); err == nil {
		d.Sync() // the rename and the new file, durable
		d.Close()
	}
	return nil
}
