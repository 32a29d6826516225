//go:build !(cgo && lmdb)

package bench

// Without the binding, naming the engine explains how to get it.
var _ = markUnavailable(LMDBEngine, "the lmdb engine is not built into this binary: "+
	"install liblmdb-dev (bench/setup-lmdb.sh) and build with cgo and -tags lmdb")

// markUnavailable records that engine name is not built in, and why.
func markUnavailable(name, why string) bool {
	unavailable[name] = why
	return true
}
