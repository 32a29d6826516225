package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// largeValueWorkload stores values of hundreds of MiB (bbolt #931: bbolt
// 1.3.9 to 1.4 crashed storing or reading a value above 256 MiB, with
// "slice bounds out of range"). For each of --value-sizes, a child process
// per engine (child.go: peak RSS is per process, and a crash must not take
// the benchmark down) puts one value of that size in one transaction,
// compares it with what Get returns, closes, reopens, compares again, and
// runs the engine's Check. A child that crashes or finds the value wrong
// is reported as a failed round trip with a note saying why.
var largeValueWorkload = Workload{
	Name:          "large-value",
	Summary:       "bbolt #931: one value of each of --value-sizes put in one transaction, read back, reopened, read back, checked, in a child process per engine: times and peak RSS",
	Run:           runLargeValue,
	OnlyWhenNamed: true,
}

var _ = registerChild("large-value", largeValueChild)

// largeValueKey is the key the value is stored under.
var largeValueKey = []byte("large")

// Figures the large-value child reports.
const (
	lvPut       = "put and commit"
	lvGet       = "get and compare"
	lvReopen    = "reopen"
	lvGetReopen = "get and compare after reopen"
	lvCheck     = "check"
	lvFileSize  = "file size"
)

func runLargeValue(ctx context.Context, env *Env) error {
	if len(env.Config.ValueSizes) == 0 {
		return errors.New("no value sizes to store (--value-sizes)")
	}
	for _, z := range env.Config.ValueSizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		label := z.String()
		path := env.Path("large.db")
		p := env.Progress(label+" value", 1)
		res, err := runChild(ctx, "large-value", map[string]string{
			"engine": env.Engine.Name(), "path": path, "size": strconv.FormatInt(int64(z), 10),
		}, 0)
		p.Add(1)
		p.Done()
		var ce *childError
		switch {
		case errors.As(err, &ce):
			why := ce.Crash()
			if why == "" {
				why = ce.Error()
			}
			env.Note(fmt.Sprintf("%s value: round trip failed: %s", label, why))
			env.Scalar(label+": round trip succeeded", UnitCount, Higher, 0)
		case err != nil:
			return err
		default:
			env.Scalar(label+": round trip succeeded", UnitCount, Higher, 1)
			for _, f := range []string{lvPut, lvGet, lvReopen, lvGetReopen, lvCheck} {
				if v, ok := res.Figures[f]; ok {
					env.Scalar(label+": "+f, UnitDuration, Lower, v)
				}
			}
			env.Scalar(label+": "+lvFileSize, UnitBytes, Lower, res.Figures[lvFileSize])
			env.Scalar(label+": peak RSS", UnitBytes, Lower, float64(res.PeakRSS))
			env.Scalar(label+": peak RSS beyond the value itself", UnitBytes, Lower, float64(res.PeakRSS-int64(z)))
		}
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// largeValueChild is the child's whole life: the round trip of one value
// of args["size"] bytes on args["engine"] at args["path"].
func largeValueChild(args map[string]string) (childResult, error) {
	e, err := LookupEngine(args["engine"])
	if err != nil {
		return childResult{}, err
	}
	size, err := strconv.ParseInt(args["size"], 10, 64)
	if err != nil {
		return childResult{}, fmt.Errorf("size: %w", err)
	}
	path := args["path"]
	want := largeValueBytes(int(size))
	figs := map[string]float64{}
	timed := func(name string, fn func() error) error {
		start := time.Now()
		err := fn()
		figs[name] = float64(time.Since(start))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	compare := func(db DB) error {
		vc, ok := db.(ValueChecker)
		if !ok {
			return fmt.Errorf("engine %s cannot compare values", e.Name())
		}
		equal, err := vc.ValueEquals(BucketName, largeValueKey, want)
		if err == nil && !equal {
			err = errors.New("the value read back differs from the value stored")
		}
		return err
	}

	db, err := e.Open(path, OpenOptions{})
	if err != nil {
		return childResult{}, err
	}
	err = timed(lvPut, func() error { return db.Update(BucketName, []KV{{Key: largeValueKey, Value: want}}) })
	if err == nil {
		err = timed(lvGet, func() error { return compare(db) })
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return childResult{}, err
	}
	if err := timed(lvReopen, func() error { db, err = e.Open(path, OpenOptions{}); return err }); err != nil {
		return childResult{}, err
	}
	err = timed(lvGetReopen, func() error { return compare(db) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return childResult{}, err
	}
	if ins, ok := e.(Inspector); ok {
		err = timed(lvCheck, func() error {
			var problems []error
			n, err := ins.Check(path, func(p error) { problems = append(problems, p) })
			if err == nil && n > 0 {
				err = fmt.Errorf("%d problems: %w", n, errors.Join(problems...))
			}
			return err
		})
		if err != nil {
			return childResult{}, err
		}
	}
	size2, err := fileSize(path)
	figs[lvFileSize] = float64(size2)
	return childResult{Figures: figs}, err
}

// largeValueBytes returns size bytes that differ at every 8-byte word (a
// xorshift stream), so a misplaced page cannot compare equal.
func largeValueBytes(size int) []byte {
	v := make([]byte, size)
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i+8 <= size; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(v[i:], x)
	}
	return v
}
