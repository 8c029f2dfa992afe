package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/intentledger/intentd/fsm"
)

// ErrLedgerFull refuses a claim that would add an intent while the node
// that decides (the leader) is past a capacity: free disk below its
// reserve, its data dir over its cap, or its live heap over its memory's
// high water. Nothing was written. Claims of keys the ledger holds,
// reports, approvals, resolves and reads are still served; claims of new
// keys are admitted again once the resource has room (see CapacityError).
var ErrLedgerFull = errors.New("the ledger is full")

// Capacity resources, the CapacityError.Resource and metric labels.
const (
	// ResourceDisk is the free space of the file system holding the data
	// dir, which must stay above a reserve.
	ResourceDisk = "disk"
	// ResourceDataDir is the size of the data dir, which must stay under
	// its cap.
	ResourceDataDir = "data_dir"
	// ResourceMemory is the Go live heap (the ledger is held in memory),
	// which must stay under a high-water fraction of the memory capacity.
	ResourceMemory = "memory"
)

// Resources are the capacity resources, in the order they are checked.
var Resources = []string{ResourceDisk, ResourceDataDir, ResourceMemory}

// CapacityError is a claim refused by ErrLedgerFull: which resource, how
// much of it is used, where refusals start and its capacity, in bytes.
type CapacityError struct {
	Resource string
	// Used is what the resource holds: for disk, the file system's used
	// bytes; for data_dir, the data dir's bytes; for memory, the live heap.
	Used uint64
	// Limit is where refusals start: for disk the file system's size less
	// the reserve, for data_dir its cap, for memory the high water.
	Limit uint64
	// Capacity is the resource's size: the file system's, the data dir's
	// cap, the memory capacity.
	Capacity uint64
}

func (e *CapacityError) Error() string {
	var what string
	switch e.Resource {
	case ResourceDisk:
		what = fmt.Sprintf("the file system of the data dir has %s free, under its reserve of %s (%s used of %s)",
			humanize.IBytes(e.Capacity-min(e.Used, e.Capacity)), humanize.IBytes(e.Capacity-min(e.Limit, e.Capacity)), humanize.IBytes(e.Used), humanize.IBytes(e.Capacity))
	case ResourceDataDir:
		what = fmt.Sprintf("the data dir holds %s, its cap is %s", humanize.IBytes(e.Used), humanize.IBytes(e.Limit))
	case ResourceMemory:
		what = fmt.Sprintf("the live heap is %s, over the high water of %s of the memory capacity of %s",
			humanize.IBytes(e.Used), humanize.IBytes(e.Limit), humanize.IBytes(e.Capacity))
		if e.Used < e.Limit {
			what = fmt.Sprintf("the live heap is %s, back under the high water of %s of the memory capacity of %s but not yet %s under it",
				humanize.IBytes(e.Used), humanize.IBytes(e.Limit), humanize.IBytes(e.Capacity), humanize.IBytes(readmitMargin(e.Capacity)))
		}
	default:
		what = fmt.Sprintf("%s uses %d of %d bytes", e.Resource, e.Used, e.Limit)
	}
	return "the ledger is full (" + e.Resource + "): " + what +
		"; claims of new keys are refused until there is room (purges past the dedupe window, or an operator freeing space); nothing was written, and reports, reads and claims of keys the ledger holds are served"
}

// Unwrap returns ErrLedgerFull.
func (e *CapacityError) Unwrap() error { return ErrLedgerFull }

// CapacityLimits say where claims of new keys are refused. A zero field
// turns its check off.
type CapacityLimits struct {
	// MinFreeDisk is the reserve of free bytes on the data dir's file
	// system; MinFreeDiskAuto uses the smaller of 1 GiB and 10% of the
	// file system.
	MinFreeDisk     uint64
	MinFreeDiskAuto bool
	// MaxDataBytes caps the bytes in the data dir.
	MaxDataBytes uint64
	// MaxMemory is the memory capacity (a cgroup's limit, GOMEMLIMIT or
	// --max-memory), and MemoryHighWater the fraction of it the live heap
	// may reach (DefaultMemoryHighWater when 0).
	MaxMemory       uint64
	MemoryHighWater float64
}

// DefaultMemoryHighWater is the fraction of the memory capacity the live
// heap may reach before claims of new keys are refused: the rest is for
// the garbage between collections (GOMEMLIMIT is set to 90%), a snapshot's
// copy-on-write and the memory outside the heap.
const DefaultMemoryHighWater = 0.8

// autoDiskReserve is MinFreeDiskAuto's reserve for a file system of size
// bytes: the smaller of 1 GiB and 10% of it.
func autoDiskReserve(size uint64) uint64 { return min(1<<30, size/10) }

// Validate refuses limits that cannot be applied.
func (l CapacityLimits) Validate() error {
	if l.MemoryHighWater < 0 || l.MemoryHighWater > 1 || l.MemoryHighWater != l.MemoryHighWater {
		return fmt.Errorf("memory high water %v must be in (0, 1]", l.MemoryHighWater)
	}
	return nil
}

// CapacityReaders read the resources; a nil reader turns its resource off.
// They are called off the claim path, by CapacityMonitor's samples.
type CapacityReaders struct {
	// Disk returns the free bytes (an unprivileged writer's) and the size
	// of the data dir's file system.
	Disk func() (free, size uint64, err error)
	// DataBytes returns the bytes in the data dir.
	DataBytes func() (uint64, error)
	// HeapLive returns the live heap at the last collection.
	HeapLive func() uint64
	// Collect runs a garbage collection, so that HeapLive sees the room
	// purges made while nothing allocates (claims being refused). Called
	// at most every CollectEvery while memory refuses; nil: never.
	Collect func()
}

// ResourceUsage is one resource as last sampled.
type ResourceUsage struct {
	Resource string
	// Capacity, Used and Limit are as in CapacityError.
	Capacity, Used, Limit uint64
	// Refusing says whether claims of new keys are refused for it.
	Refusing bool
	// Refused counts the claims it refused.
	Refused uint64
	// Err is the reader's error of the last sample (the resource is then
	// not refusing).
	Err error
	// holding: under its limit but not yet below the re-admission mark.
	holding bool
}

// memoryReadmitMargin is the fraction of the memory capacity the live heap
// must fall below the high water before memory admits claims again.
const memoryReadmitMargin = 0.05

// readmitMargin is memoryReadmitMargin of capacity, in bytes.
func readmitMargin(capacity uint64) uint64 { return uint64(float64(capacity) * memoryReadmitMargin) }

// CapacityMonitor samples the resources off the claim path (every
// Interval, and soon after a refusal) and keeps the verdict where the
// claim path reads it with one atomic load. Its zero value is not usable:
// make one with NewCapacityMonitor.
type CapacityMonitor struct {
	limits  CapacityLimits
	readers CapacityReaders
	// Interval is the time between samples; CollectEvery the least time
	// between forced collections (Readers.Collect).
	interval, collectEvery time.Duration
	now                    func() time.Time

	full atomic.Pointer[CapacityError]
	// memRefusing: the last sample refused for memory (hysteresis).
	memRefusing atomic.Bool
	refused     [3]atomic.Uint64 // by Resources' index
	poke        chan struct{}

	mu          sync.Mutex
	usage       []ResourceUsage
	lastCollect time.Time
	// onChange, when set, is told of a change of verdict (for the log).
	onChange func(old, now *CapacityError)
}

// CapacityOptions are a CapacityMonitor's timings and hooks; zero fields
// take defaults.
type CapacityOptions struct {
	// Interval between samples (1 s).
	Interval time.Duration
	// CollectEvery is the least time between forced collections while
	// memory refuses (10 s).
	CollectEvery time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// OnChange is told when claims start or stop being refused.
	OnChange func(old, now *CapacityError)
}

// NewCapacityMonitor returns a monitor of limits through readers; it has
// sampled once when it returns. Run keeps it sampling.
func NewCapacityMonitor(limits CapacityLimits, readers CapacityReaders, opt CapacityOptions) (*CapacityMonitor, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	if limits.MemoryHighWater == 0 {
		limits.MemoryHighWater = DefaultMemoryHighWater
	}
	m := &CapacityMonitor{limits: limits, readers: readers, interval: opt.Interval, collectEvery: opt.CollectEvery,
		now: opt.Now, onChange: opt.OnChange, poke: make(chan struct{}, 1)}
	if m.interval <= 0 {
		m.interval = time.Second
	}
	if m.collectEvery <= 0 {
		m.collectEvery = 10 * time.Second
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.Sample()
	return m, nil
}

// Limits returns the limits in force.
func (m *CapacityMonitor) Limits() CapacityLimits { return m.limits }

// Full returns why claims of new keys are refused, or nil: one atomic load.
func (m *CapacityMonitor) Full() *CapacityError { return m.full.Load() }

// Sample reads every resource now and updates the verdict: the first
// resource (in Resources' order) past its limit, or none.
func (m *CapacityMonitor) Sample() {
	usage := make([]ResourceUsage, 0, len(Resources))
	var full *CapacityError
	note := func(u ResourceUsage) {
		u.Refusing = u.Err == nil && u.Limit > 0 && (u.Used >= u.Limit || u.holding)
		if u.Resource == ResourceDisk {
			// Disk refuses when free (capacity - used) < reserve
			// (capacity - limit), i.e. used > limit.
			u.Refusing = u.Err == nil && u.Capacity > 0 && u.Used > u.Limit
		}
		if u.Refusing && full == nil {
			full = &CapacityError{Resource: u.Resource, Used: u.Used, Limit: u.Limit, Capacity: u.Capacity}
		}
		usage = append(usage, u)
	}
	if r := m.readers.Disk; r != nil && (m.limits.MinFreeDisk > 0 || m.limits.MinFreeDiskAuto) {
		free, size, err := r()
		reserve := m.limits.MinFreeDisk
		if m.limits.MinFreeDiskAuto {
			reserve = autoDiskReserve(size)
		}
		u := ResourceUsage{Resource: ResourceDisk, Capacity: size, Used: size - min(free, size),
			Limit: size - min(reserve, size), Err: err}
		note(u)
	}
	if r := m.readers.DataBytes; r != nil && m.limits.MaxDataBytes > 0 {
		n, err := r()
		note(ResourceUsage{Resource: ResourceDataDir, Capacity: m.limits.MaxDataBytes, Used: n, Limit: m.limits.MaxDataBytes, Err: err})
	}
	if r := m.readers.HeapLive; r != nil && m.limits.MaxMemory > 0 {
		limit := uint64(float64(m.limits.MaxMemory) * m.limits.MemoryHighWater)
		live := r()
		if live >= limit && m.readers.Collect != nil {
			// Refused claims allocate little: collect, so that what purges
			// and completes freed is seen, and read again.
			m.mu.Lock()
			due := m.now().Sub(m.lastCollect) >= m.collectEvery
			if due {
				m.lastCollect = m.now()
			}
			m.mu.Unlock()
			if due {
				m.readers.Collect()
				live = r()
			}
		}
		// Hysteresis: a collection brings the live heap back under the
		// high water for a moment, and admitting claims at once made the
		// refusal flap (1,257 refusals with 4.9k intents admitted between
		// them in make bench-capacity). Once refusing, memory admits again
		// only below the high water less memoryReadmitMargin of capacity.
		u := ResourceUsage{Resource: ResourceMemory, Capacity: m.limits.MaxMemory, Used: live, Limit: limit}
		if m.memRefusing.Load() && live < limit && live+readmitMargin(m.limits.MaxMemory) >= limit {
			u.holding = true
		}
		note(u)
		m.memRefusing.Store(usage[len(usage)-1].Refusing)
	}
	for i := range usage {
		usage[i].Refused = m.refused[resourceIndex(usage[i].Resource)].Load()
	}
	old := m.full.Swap(full)
	m.mu.Lock()
	m.usage = usage
	m.mu.Unlock()
	changed := (old == nil) != (full == nil) || old != nil && full != nil && old.Resource != full.Resource
	if changed && m.onChange != nil {
		m.onChange(old, full)
	}
}

// Usage returns the resources as last sampled, in Resources' order (those
// turned off left out), with their refusals counted to now.
func (m *CapacityMonitor) Usage() []ResourceUsage {
	m.mu.Lock()
	out := append([]ResourceUsage(nil), m.usage...)
	m.mu.Unlock()
	for i := range out {
		out[i].Refused = m.refused[resourceIndex(out[i].Resource)].Load()
	}
	return out
}

// Refused returns the claims refused for resource so far.
func (m *CapacityMonitor) Refused(resource string) uint64 {
	return m.refused[resourceIndex(resource)].Load()
}

func resourceIndex(resource string) int {
	for i, r := range Resources {
		if r == resource {
			return i
		}
	}
	return 0
}

// refuse counts a refusal of e and asks for a sample soon, so that room
// made since the last one admits claims again without waiting a whole
// Interval.
func (m *CapacityMonitor) refuse(e *CapacityError) {
	m.refused[resourceIndex(e.Resource)].Add(1)
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// Run samples every Interval, and after refusals (at most every tenth of
// an Interval), until ctx is done.
func (m *CapacityMonitor) Run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	last := m.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.poke:
			if m.now().Sub(last) < m.interval/10 {
				continue
			}
		}
		m.Sample()
		last = m.now()
	}
}

// checkCapacity refuses claim with a *CapacityError when the leader is
// past a capacity and the claim would add an intent (its key is not in
// the ledger). A claim of a key the ledger holds (a duplicate, a repeat,
// a retry after failed) adds none and is never refused by it. Only the
// leader decides: a follower's claim goes on to the leader (its proposal
// fails as not the leader, and is forwarded), where it is checked.
func (s *Service) checkCapacity(ctx context.Context, c *fsm.Claim) error {
	if s.capacity == nil {
		return nil
	}
	full := s.capacity.Full()
	if full == nil {
		return nil
	}
	if s.quotas.leading != nil && !s.quotas.leading() {
		return nil
	}
	var creates bool
	if err := s.r.Read(ctx, Stale, func(l *fsm.Machine) { creates = l.Get(c.Namespace, c.Key) == nil }); err != nil {
		return err
	}
	if !creates {
		return nil
	}
	s.capacity.refuse(full)
	return full
}
