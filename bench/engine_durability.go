package bench

import (
	"time"

	"github.com/rivetkv/rivet"
)

// The durability variants: rivet in its three other durability modes, and
// bbolt with NoSync, the mode containerd and buildkit users switch to and
// the speed rivet's Periodic and None aim to approach.
// They exist for the concurrent-durable and mode-latency workloads. They
// are variants, not engines of their own: a run that names no engines
// leaves them out (see Variant), and they are not Inspectors (their files
// are rivet's and bbolt's, which the base engines read).
var _ = register(
	variantEngine{name: RivetBarrierEngine, open: rivetMode(rivet.Barrier)},
	variantEngine{name: RivetPeriodicEngine, open: rivetMode(rivet.Periodic(RivetPeriodicInterval))},
	variantEngine{name: RivetNoneEngine, open: rivetMode(rivet.None)},
	variantEngine{name: BoltNoSyncEngine, open: boltEngine{name: BoltNoSyncEngine, noSync: true}.Open},
)

// Names of the durability variants.
const (
	// RivetBarrierEngine is rivet with Durability Barrier (on Linux and
	// Windows a barrier is a full flush, so it behaves as Full there).
	RivetBarrierEngine = "rivet-barrier"
	// RivetPeriodicEngine is rivet with Durability Periodic(RivetPeriodicInterval).
	RivetPeriodicEngine = "rivet-periodic"
	// RivetNoneEngine is rivet with Durability None (bbolt's NoSync, but
	// crash-consistent).
	RivetNoneEngine = "rivet-none"
	// BoltNoSyncEngine is bbolt with NoSync: no fsync at commit, and a file
	// a power loss can corrupt.
	BoltNoSyncEngine = "bbolt-nosync"
)

// RivetPeriodicInterval is the sync interval of the rivet-periodic engine.
const RivetPeriodicInterval = time.Second

// DurabilityEngines are the engines of the durability comparison, in the
// order of the modes' strength: rivet's four modes, then bbolt default and
// bbolt with NoSync.
var DurabilityEngines = []string{RivetEngine, RivetBarrierEngine, RivetPeriodicEngine, RivetNoneEngine,
	BaselineEngine, BoltNoSyncEngine}

// Variant is implemented by engines that run only when named: the same
// library as another engine with one option changed.
type Variant interface {
	Engine
	// Variant returns the name of the engine this one is a variant of.
	Variant() string
}

// variantEngine is an engine that differs from a base engine in one option.
type variantEngine struct {
	name string
	open func(path string, opts OpenOptions) (DB, error)
}

// Name implements Engine.
func (e variantEngine) Name() string { return e.name }

// Open implements Engine.
func (e variantEngine) Open(path string, opts OpenOptions) (DB, error) { return e.open(path, opts) }

// Variant implements Variant.
func (e variantEngine) Variant() string {
	if e.name == BoltNoSyncEngine {
		return BaselineEngine
	}
	return RivetEngine
}

// rivetMode returns an Open function for rivet with durability mode d.
func rivetMode(d rivet.Durability) func(string, OpenOptions) (DB, error) {
	return func(path string, opts OpenOptions) (DB, error) {
		o := rivetEngine{}.options(opts.ReadOnly)
		o.Durability = d
		return openRivet(path, o)
	}
}
