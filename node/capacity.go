package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intentledger/intentd/ledger"
)

// CapacityConfig is where the leader refuses claims of new keys with 507
// ledger_full (ledger.CapacityMonitor). A zero field turns its check off.
type CapacityConfig struct {
	// MinFreeDisk is the reserve of free bytes on the data dir's file
	// system (--min-free-disk); MinFreeDiskAuto (the default) uses the
	// smaller of 1 GiB and 10% of the file system.
	MinFreeDisk     uint64
	MinFreeDiskAuto bool
	// MaxDataBytes caps the data dir's bytes (--max-data-bytes).
	MaxDataBytes uint64
	// MaxMemory is the memory capacity (--max-memory; cmd/intentd sets it
	// from the cgroup's limit, GOMEMLIMIT or the machine's memory, see
	// MemoryCapacity), and MemoryHighWater the fraction of it the live
	// heap may reach (--memory-high-water; 0: 0.8).
	MaxMemory       uint64
	MemoryHighWater float64
	// MaxMemoryAuto makes Start take MaxMemory from MemoryCapacity
	// (cmd/intentd resolves it before, to set GOMEMLIMIT).
	MaxMemoryAuto bool
}

// DefaultMemoryHighWater is the MemoryHighWater a zero value means.
const DefaultMemoryHighWater = ledger.DefaultMemoryHighWater

// limits is the ledger's view of c.
func (c CapacityConfig) limits() ledger.CapacityLimits {
	return ledger.CapacityLimits{MinFreeDisk: c.MinFreeDisk, MinFreeDiskAuto: c.MinFreeDiskAuto,
		MaxDataBytes: c.MaxDataBytes, MaxMemory: c.MaxMemory, MemoryHighWater: c.MemoryHighWater}
}

// ParseSize reads a size in bytes: a number with an optional unit, binary
// (KiB, MiB, GiB, TiB) or decimal (KB, MB, GB, TB), e.g. 512MiB or 2GB.
func ParseSize(s string) (uint64, error) {
	n, err := humanize.ParseBytes(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (512MiB, 2GB): %w", s, err)
	}
	return n, nil
}

// MemoryCapacity is the memory the process may use, and where it comes
// from: the memory cgroup's limit (v1 or v2, found through
// /proc/self/cgroup), else GOMEMLIMIT when set, else the machine's
// memory. automemlimit resolves the cgroup the process is in (nested,
// hybrid v1/v2), not only the root's files.
func MemoryCapacity() (limit uint64, source string, err error) {
	if v, err := memlimit.FromCgroup(); err == nil && v > 0 && v < math.MaxInt64 {
		return v, "cgroup", nil
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		if v := debug.SetMemoryLimit(-1); v > 0 && v < math.MaxInt64 {
			return uint64(v), "GOMEMLIMIT", nil
		}
	}
	v, err := memlimit.FromSystem()
	if err != nil || v == 0 {
		return 0, "", fmt.Errorf("memory capacity: no cgroup limit, no GOMEMLIMIT and the machine's memory unknown: %w", err)
	}
	return v, "system", nil
}

// GoMemLimitRatio is the fraction of the memory capacity SetGoMemLimit
// gives the Go runtime as its soft limit.
const GoMemLimitRatio = 0.9

// SetGoMemLimit sets the Go runtime's soft memory limit to
// GoMemLimitRatio of capacity, unless GOMEMLIMIT is set (or AUTOMEMLIMIT
// is off), and returns the limit in force. The process-wide setting is
// cmd/intentd's to make, not a node's (tests run many in one process).
func SetGoMemLimit(capacity uint64) (int64, error) {
	if capacity == 0 || capacity > math.MaxInt64 {
		return debug.SetMemoryLimit(-1), nil
	}
	return memlimit.Set(memlimit.WithProvider(memlimit.Limit(capacity)), memlimit.WithRatio(GoMemLimitRatio))
}

// heapLive reads the Go live heap at the last collection
// (runtime/metrics /gc/heap/live:bytes).
func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// dirBytes is the size of the regular files under dir, each file once:
// a checkpoint snapshot hard-links the state store's files, which take
// their space once however many names they have.
func dirBytes(dir string) (uint64, error) {
	var n uint64
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walked (a compacted segment)
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			id := inode{uint64(st.Dev), st.Ino}
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		n += uint64(info.Size())
		return nil
	})
	return n, err
}

// newCapacityMonitor samples the data dir's disk and size and the live
// heap as c says; it logs when claims of new keys start and stop being
// refused.
func newCapacityMonitor(c CapacityConfig, dir string, log *slog.Logger) (*ledger.CapacityMonitor, error) {
	readers := ledger.CapacityReaders{
		Disk:      func() (uint64, uint64, error) { return diskSpace(dir) },
		DataBytes: func() (uint64, error) { return dirBytes(dir) },
		HeapLive:  heapLive,
		Collect:   runtime.GC,
	}
	return ledger.NewCapacityMonitor(c.limits(), readers, ledger.CapacityOptions{
		OnChange: func(old, now *ledger.CapacityError) {
			if now != nil {
				log.Warn("the ledger is full: claims of new keys are refused (507 ledger_full) until there is room", "resource", now.Resource,
					"used", now.Used, "limit", now.Limit, "capacity", now.Capacity, "detail", now.Error())
				return
			}
			log.Info("the ledger has room again: claims of new keys are admitted", "resource", old.Resource)
		},
	})
}

// runCapacity runs mon until the returned stop is called; stop waits for
// it to end.
func runCapacity(mon *ledger.CapacityMonitor) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { mon.Run(ctx) })
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// capacityCollector exports the capacity per resource as last sampled.
type capacityCollector struct {
	mon                                       *ledger.CapacityMonitor
	capacity, used, limit, headroom, refusing *prometheus.Desc
	refused                                   *prometheus.Desc
}

func newCapacityCollector(mon *ledger.CapacityMonitor) *capacityCollector {
	l := []string{"resource"}
	return &capacityCollector{
		mon:      mon,
		capacity: prometheus.NewDesc("intentd_capacity_bytes", "Size of each capacity resource: disk (the data dir's file system), data_dir (--max-data-bytes), memory (the memory capacity: cgroup limit, GOMEMLIMIT or --max-memory).", l, nil),
		used:     prometheus.NewDesc("intentd_capacity_used_bytes", "What each capacity resource holds: disk (the file system's used bytes), data_dir (the data dir's bytes), memory (the Go live heap at the last collection).", l, nil),
		limit:    prometheus.NewDesc("intentd_capacity_limit_bytes", "Where the leader starts refusing claims of new keys (507 ledger_full), per resource: disk (size less --min-free-disk), data_dir (--max-data-bytes), memory (--memory-high-water of the capacity).", l, nil),
		headroom: prometheus.NewDesc("intentd_capacity_headroom_bytes", "Bytes left before the leader refuses claims of new keys (limit less used; 0 or less: refusing), per resource.", l, nil),
		refusing: prometheus.NewDesc("intentd_capacity_refusing", "1 while claims of new keys are refused for the resource (507 ledger_full, on the leader), else 0.", l, nil),
		refused:  prometheus.NewDesc("intentd_ledger_full_total", "Claims of new keys this node refused with 507 ledger_full, by resource.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.capacity, c.used, c.limit, c.headroom, c.refusing, c.refused} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A resource whose reader failed
// exports only its refusals.
func (c *capacityCollector) Collect(ch chan<- prometheus.Metric) {
	for _, u := range c.mon.Usage() {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(u.Refused), u.Resource)
		if u.Err != nil {
			continue
		}
		refusing := 0.0
		if u.Refusing {
			refusing = 1
		}
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(u.Capacity), u.Resource)
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(u.Used), u.Resource)
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(u.Limit), u.Resource)
		ch <- prometheus.MustNewConstMetric(c.headroom, prometheus.GaugeValue, float64(u.Limit)-float64(u.Used), u.Resource)
		ch <- prometheus.MustNewConstMetric(c.refusing, prometheus.GaugeValue, refusing, u.Resource)
	}
}
