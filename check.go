package rivet

import (
	"fmt"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
)

// maxCheckErrors bounds what Check collects: a file whose pages form
// cycles could otherwise report the same problem without end.
const maxCheckErrors = 1000

// CheckOption configures Tx.Check.
type CheckOption func(*checkConfig)

type checkConfig struct {
	kvStringer KVStringer
	pageID     uint64
}

// KVStringer formats keys and values in Check's messages.
type KVStringer interface {
	KeyToString([]byte) string
	ValueToString([]byte) string
}

// HexKVStringer formats keys and values as hex.
func HexKVStringer() KVStringer { return hexKV{} }

type hexKV struct{}

func (hexKV) KeyToString(k []byte) string   { return fmt.Sprintf("%x", k) }
func (hexKV) ValueToString(v []byte) string { return fmt.Sprintf("%x", v) }

// WithKVStringer sets how Check formats keys and values.
func WithKVStringer(s KVStringer) CheckOption { return func(c *checkConfig) { c.kvStringer = s } }

// WithPageId is accepted for bbolt compatibility; rivet always checks the
// whole file.
func WithPageId(id uint64) CheckOption { return func(c *checkConfig) { c.pageID = id } }

// Check verifies the whole database state the transaction sees and sends
// every problem found on the returned channel, which is closed when the check
// ends. It checks that every page is reachable at most once, that keys are
// ordered and within their parents' bounds, that every run's checksum matches
// the one its parent recorded, that blob chains add up, and — when the
// transaction sees the newest state and no write is in progress — that the
// free-space maps agree with the tree: no page both reachable and free, and
// none leaked (neither reachable nor free).
//
// Problems are *errors.CorruptError values (errors.Is(err, ErrCorrupt))
// naming the page and what is wrong.
//
// The check runs before Check returns, while the transaction is certainly
// open; the channel only delivers its findings, so a caller that ends the
// transaction before draining it reads nothing of a released snapshot. On
// an ended transaction the channel delivers ErrTxClosed.
func (tx *Tx) Check(options ...CheckOption) <-chan error {
	var errs []error
	if tx.ended() {
		errs = []error{ErrTxClosed}
	} else {
		errs = tx.check()
	}
	ch := make(chan error)
	go func() {
		defer close(ch)
		for _, err := range errs {
			ch <- err
		}
	}()
	return ch
}

func (tx *Tx) check() []error {
	if b := tx.db.bolt; b != nil {
		return b.check()
	}
	errs, seen := tx.checkTree()
	if len(errs) == 0 && !tx.writable {
		errs = tx.db.checkFreeSpace(tx.meta, seen)
	}
	return errs
}

// checkFetchTestHook, when set by a test, is told the length of every run
// Check's walk reads: the work the hostile-file tests bound by the file's
// pages.
var checkFetchTestHook func(pages uint64)

// checkTree walks the whole state, returning the problems found and the set
// of reachable pages.
func (tx *Tx) checkTree() ([]error, []uint64) {
	var errs []error
	report := func(err error) bool {
		if len(errs) < maxCheckErrors {
			errs = append(errs, err)
		}
		return len(errs) < maxCheckErrors
	}
	hwm := tx.meta.HWM
	ps := tx.env.PageSize
	seen := make([]uint64, (hwm+63)/64)
	data := tx.env.Data
	dirty := tx.env.Dirty
	w := btree.Walker{
		Fetch: func(id page.ID, n uint64) ([]byte, error) {
			if checkFetchTestHook != nil {
				checkFetchTestHook(n)
			}
			if run := dirty.Run(id); n <= uint64(len(run))/uint64(ps) {
				// A page made since the last sync point: the map may
				// not show it yet.
				return run[:n*uint64(ps)], nil
			}
			end := (id + n) * uint64(ps)
			if end > uint64(len(data)) || id+n > hwm {
				return nil, page.Corruptf(id, "run of %d pages beyond the file", n)
			}
			return data[id*uint64(ps) : end], nil
		},
		PageSize:        ps,
		HWM:             hwm,
		All:             true,
		VerifyChecksums: true,
		Report:          report,
		Readahead:       tx.env.Readahead,
		Visit: func(id page.ID, n uint64, t page.Type) error {
			for p := id; p < id+n && p < hwm; p++ {
				if seen[p/64]&(1<<(p%64)) != 0 {
					return page.Corruptf(p, "page reachable twice (%v run at %d)", t, id)
				}
				seen[p/64] |= 1 << (p % 64)
			}
			return nil
		},
	}
	_ = w.Walk(tx.meta.Root)
	return errs, seen
}

// checkFreeSpace compares the reachable set with the free-space maps, if
// meta is still the newest state. It takes the writer lock without waiting:
// if a write transaction is running the comparison is skipped.
func (db *DB) checkFreeSpace(meta *page.Meta, seen []uint64) []error {
	if db.readOnly || !db.writer.TryLock() {
		return nil
	}
	defer db.writer.Unlock()
	// The map describes db.head; compare only if the snapshot is head.
	if db.head.Txid != meta.Txid || db.head.Root != meta.Root {
		return nil
	}
	return db.compareFree(meta, seen)
}

// compareFree checks that every page below the HWM is exactly one of: a
// meta, a map slot, reachable, or free. Caller holds the writer lock.
func (db *DB) compareFree(meta *page.Meta, seen []uint64) []error {
	var errs []error
	ps := db.pageSize
	hwm := meta.HWM
	free := make([]uint64, len(seen))
	db.spaceMu.Lock()
	defer db.spaceMu.Unlock()
	err := db.space.ForEachFree(func(id page.ID, n uint64) error {
		for p := id; p < id+n; p++ {
			if p >= hwm {
				errs = append(errs, page.Corruptf(p, "free page at or above the high-water mark %d", hwm))
				return nil
			}
			free[p/64] |= 1 << (p % 64)
		}
		return nil
	})
	if err != nil {
		return append(errs, err)
	}
	rp := page.RegionPages(ps)
	for p := uint64(0); p < hwm && len(errs) < maxCheckErrors; p++ {
		reach := seen[p/64]&(1<<(p%64)) != 0
		isFree := free[p/64]&(1<<(p%64)) != 0
		fixed := p < 2 || p%rp < page.RegionFirstData(ps, p/rp)-(p/rp)*rp
		switch {
		case fixed && (reach || isFree):
			errs = append(errs, page.Corruptf(p, "meta or map-slot page is reachable (%t) or free (%t)", reach, isFree))
		case reach && isFree:
			errs = append(errs, page.Corruptf(p, "page is both reachable and free"))
		case !fixed && !reach && !isFree:
			errs = append(errs, page.Corruptf(p, "page is neither reachable nor free (leaked)"))
		}
	}
	return errs
}

// strictCheck runs a full check of the state just committed (StrictMode).
// Caller holds the writer lock.
func (db *DB) strictCheck(meta *page.Meta) error {
	view := db.pager.Acquire()
	defer view.Release()
	tx := &Tx{txState: &txState{db: db, meta: meta, view: view}, txid: meta.Txid}
	tx.env = &btree.Env{Data: view.Bytes(), PageSize: db.pageSize, HWM: meta.HWM, Txid: meta.Txid, Dirty: db.pager.Dirty()}
	errs, seen := tx.checkTree()
	if len(errs) == 0 {
		errs = db.compareFree(meta, seen)
	}
	if len(errs) > 0 {
		return fmt.Errorf("rivet: strict mode check after commit: %w", errs[0])
	}
	return nil
}
