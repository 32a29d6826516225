// Package prometheus exports a rivet database's statistics as Prometheus
// metrics.
//
// The collector reads DB.Stats (and the file's size) at every scrape, so
// it costs nothing between scrapes and never holds a transaction open:
//
//	db, err := rivet.Open("app.db", 0o600, nil)
//	...
//	prometheus.MustRegister(rivetprom.NewCollector(db, rivetprom.Options{
//		ConstLabels: prometheus.Labels{"db": "app"},
//	}))
//	http.Handle("/metrics", promhttp.Handler())
//
// Metric names follow Prometheus conventions: a rivet_ prefix (Namespace),
// _total for counters, base units (bytes, seconds) in the name.
package prometheus

import (
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rivetkv/rivet"
)

// Options configure a Collector.
type Options struct {
	// Namespace prefixes every metric name; "rivet" when empty.
	Namespace string
	// ConstLabels are added to every metric, e.g. {"db": "users"} when a
	// program exports several databases.
	ConstLabels prometheus.Labels
}

// Collector is a prometheus.Collector for one rivet DB.
type Collector struct {
	db    *rivet.DB
	descs []metric
}

// metric is one exported figure: its description, its type and how to
// read it from a Stats snapshot.
type metric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(s *rivet.Stats, c *Collector) float64
}

// NewCollector returns a collector of db's statistics. Register it with a
// prometheus.Registerer; it reads db at each scrape and reports nothing
// once db is closed.
func NewCollector(db *rivet.DB, opts Options) *Collector {
	ns := opts.Namespace
	if ns == "" {
		ns = "rivet"
	}
	c := &Collector{db: db}
	add := func(name, help string, kind prometheus.ValueType, value func(*rivet.Stats, *Collector) float64) {
		c.descs = append(c.descs, metric{
			desc:  prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, nil, opts.ConstLabels),
			kind:  kind,
			value: value,
		})
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	add("commits_total", "Write transactions committed.", counter, func(s *rivet.Stats, _ *Collector) float64 { return float64(s.Commits) })
	add("flushes_total", "Flushes of the database file (fdatasync or the platform's equivalent): sync points and checkpoints; concurrent commits share one.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.Flushes) })
	add("journal_writes_total", "Commit journal writes, each one append and one flush of the journal file, shared by the commits it holds.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.JournalWrites) })
	add("journal_records_total", "Commits written to the commit journal.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.JournalRecords) })
	add("journal_written_bytes_total", "Bytes written to the commit journal.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.JournalBytes) })
	add("pages_written_total", "Pages written to the file: tree pages, free-space maps and metas.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.PagesWritten) })
	add("written_bytes_total", "Bytes written to the file.", counter, func(s *rivet.Stats, _ *Collector) float64 { return float64(s.BytesWritten) })
	add("write_calls_total", "Write calls issued after coalescing adjacent pages.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.WriteRuns) })
	add("pages_read_total", "Pages read with pread (Open, recovery, free-space maps); reads through the memory map are not counted.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.PagesRead) })
	add("read_transactions_total", "Read transactions started.", counter, func(s *rivet.Stats, _ *Collector) float64 { return float64(s.TxN) })
	add("read_transactions_open", "Read transactions open now; a long-lived one keeps the pages it sees from being reused.", gauge,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.OpenTxN) })
	add("free_pages", "Free pages in the newest committed state, ready for reuse.", gauge,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.FreePageN) })
	add("pending_pages", "Freed pages not yet reusable: a reader or the fallback state can still see them.", gauge,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.PendingPageN) })
	add("free_bytes", "Free pages times the page size.", gauge, func(s *rivet.Stats, _ *Collector) float64 { return float64(s.FreeAlloc) })
	add("free_space_map_bytes", "Memory held by loaded free-space maps.", gauge,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.FreelistInuse) })
	add("file_size_bytes", "Size of the database file.", gauge, func(_ *rivet.Stats, c *Collector) float64 { return c.fileSize() })
	add("compact_calls_total", "Compaction calls (DB.Compact and the automatic compactor).", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.CompactCalls) })
	add("compact_steps_total", "Write transactions committed by compaction.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.CompactSteps) })
	add("compact_pages_rewritten_total", "Pages compaction moved or packed.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.CompactPagesRewritten) })
	add("compact_running", "1 while a compaction runs, else 0.", gauge,
		func(s *rivet.Stats, _ *Collector) float64 { return boolValue(s.Compacting) })
	add("compact_moved_bytes", "Bytes the running compaction has rewritten so far (0 when none runs).", gauge,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.CompactBytesMoved) })
	add("compact_to_move_bytes", "Bytes the running compaction expects to rewrite in all, an estimate (0 when none runs).", gauge,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.CompactBytesToMove) })
	add("compact_longest_hold_seconds", "Longest time compaction has held the writer lock at once since Open: the longest a writer waited for it.", gauge,
		func(s *rivet.Stats, _ *Collector) float64 { return s.CompactLongestHold.Seconds() })
	add("recovery_fell_back", "1 if Open found the newest commit torn and opened the previous one (commits may have been lost), else 0.", gauge,
		func(_ *rivet.Stats, c *Collector) float64 { return boolValue(c.db.Recovery().FellBack) })
	add("recovery_damaged_meta", "1 if Open found one of the two meta pages damaged and used the other, else 0.", gauge,
		func(_ *rivet.Stats, c *Collector) float64 { return boolValue(c.db.Recovery().DamagedMeta != "") })
	add("latched", "1 if a failed flush made the DB refuse writes until it is reopened, else 0.", gauge,
		func(s *rivet.Stats, _ *Collector) float64 { return boolValue(s.Latched) })
	add("tx_pages_allocated_total", "Pages allocated by write transactions.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.TxStats.GetPageCount()) })
	add("tx_splits_total", "Node splits in write transactions.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.TxStats.GetSplit()) })
	add("tx_rebalances_total", "Node rebalances in write transactions.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return float64(s.TxStats.GetRebalance()) })
	add("tx_spill_seconds_total", "Time write transactions spent encoding changed nodes.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return s.TxStats.GetSpillTime().Seconds() })
	add("tx_write_seconds_total", "Time write transactions spent writing and flushing.", counter,
		func(s *rivet.Stats, _ *Collector) float64 { return s.TxStats.GetWriteTime().Seconds() })
	return c
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// fileSize is the file's size now, or 0 if it cannot be read.
func (c *Collector) fileSize() float64 {
	fi, err := os.Stat(c.db.Path())
	if err != nil {
		return 0
	}
	return float64(fi.Size())
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.descs {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector: one Stats snapshot per scrape,
// so the figures of a scrape are consistent with each other. A closed DB
// reports nothing.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.db.Info().Data == 0 { // closed (DB.Info's documented signal)
		return
	}
	s := c.db.Stats()
	for _, m := range c.descs {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&s, c))
	}
}
