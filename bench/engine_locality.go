package bench

// The locality variants: rivet with Options.LocalitySlack, which lets the
// file keep part of itself free so that a commit's pages land in a few
// contiguous runs (docs/design.md §4.3). Like the durability variants they
// run only when named.
var _ = register(
	variantEngine{name: RivetSlack25Engine, open: rivetSlack(0.25)},
	variantEngine{name: RivetSlack50Engine, open: rivetSlack(0.5)},
)

// Names of the locality variants.
const (
	// RivetSlack25Engine is rivet with LocalitySlack 0.25.
	RivetSlack25Engine = "rivet-slack25"
	// RivetSlack50Engine is rivet with LocalitySlack 0.5.
	RivetSlack50Engine = "rivet-slack50"
)

// rivetSlack returns an Open function for rivet with locality slack s.
func rivetSlack(s float64) func(string, OpenOptions) (DB, error) {
	return func(path string, opts OpenOptions) (DB, error) {
		o := rivetEngine{}.options(opts.ReadOnly)
		o.LocalitySlack = s
		return openRivet(path, o)
	}
}

// The journal variant: rivet in Full durability without the commit journal
// (Options.NoJournal), each commit a sync point of the file (format 3's
// protocol), to show what the journal changes. It runs only when named.
var _ = register(variantEngine{name: RivetNoJournalEngine, open: func(path string, opts OpenOptions) (DB, error) {
	o := rivetEngine{}.options(opts.ReadOnly)
	o.NoJournal = true
	return openRivet(path, o)
}})

// RivetNoJournalEngine is rivet with Options.NoJournal.
const RivetNoJournalEngine = "rivet-nojournal"
