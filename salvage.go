package rivet

import "github.com/rivetkv/rivet/internal/salvage"

// SalvageVisitor receives what Salvage can still read from a damaged file.
// The slices it is given are valid only during the call; a visitor that
// keeps them must copy them. An error it returns stops Salvage and is
// returned.
//
// Its methods: Bucket(path [][]byte, seq uint64) error is called for every
// nested bucket whose record could be read, before anything inside it
// (path is the bucket's full path, its own name last; seq its sequence
// number; the bucket may turn out empty if its pages are lost, which a
// SalvageLoss then says). Put(path [][]byte, key, value []byte) error is
// called for every key that could be read, with its value, in the bucket
// at path.
type SalvageVisitor = salvage.Visitor

// SalvageLoss is one part of a file that Salvage could not read.
//
// Either a key range of a bucket: keys in [From, To) of the bucket at
// Bucket may have been lost (From nil: from the bucket's first key; To nil:
// to its end; both nil: the whole bucket). The range comes from the
// separator keys of the last branch page that validated, so it is exactly
// the part of the key space the damaged subtree held; keys outside it were
// all read.
//
// Or, when Key is set, one entry: the value of Key (stored out of line, in
// a blob) or the nested bucket Key (its record) in the bucket at Bucket.
//
// Page is the page that failed validation and Err says why (a
// *errors.CorruptError, or the read error); Reason() is Err's text
// without the "rivet: corrupt page N: " prefix, and String() the loss in
// one line, keys quoted with %q.
type SalvageLoss = salvage.Loss

// SalvageReport is what Salvage read and what it could not: the file's
// PageSize; the meta slot (Meta) and Txid of the state salvaged; Notes on
// how that state was chosen when it is not simply the newest meta's; the
// Buckets, Keys and Bytes (names, keys and values) handed to the visitor;
// and every part that could not be read (Lost), in the order the walk met
// them.
type SalvageReport = salvage.Report

// Salvage reads every key it still can from the rivet or bbolt file at
// path, which may be damaged, and hands buckets and keys to v. Unlike a
// View walk it does not stop at the first page that fails validation: it
// verifies every page (type, own page id, the txid and CRC-32C its parent
// recorded, element bounds), skips each subtree whose page fails, and
// reports the bucket and key range it held. Pages reached twice (cycles,
// shared subtrees) are skipped the second time, so the walk reads each page
// at most once and ends on any input; memory is bounded by the file's size.
//
// The state salvaged is the one Open would use when it verifies; when no
// meta does, the newest meta whose root page validates, and when both metas
// fail their checksum, the meta fields that name a root page that validates
// (SalvageReport.Notes says which). The file is opened read-only with a
// shared lock: a file another process has open for writing is refused with
// an error matching errors.ErrTimeout.
//
// A bbolt file (of either byte order) is salvaged the same way, into the
// same report: it is taken to be one when no place a rivet meta page may
// start carries rivet's magic and some place a bbolt meta page may start
// carries bbolt's, so a bbolt file whose metas are damaged is still read as
// one. bbolt pages carry no checksums: damage is found where it breaks the
// page structure (a wrong page id or type, offsets outside the page, keys
// out of order or outside the range of the branch above, cycles); a
// changed byte inside a value cannot be seen. Of bbolt's metas, the newest
// valid one whose root page is a branch or leaf page is salvaged, else a
// damaged one's fields if its root page is.
//
// The error is nil when the walk ran, however much was lost (see
// SalvageReport.Lost); it is set when the file cannot be read at all, no
// state in it can be found, or v returned an error.
func Salvage(path string, v SalvageVisitor) (*SalvageReport, error) {
	return salvage.File(path, v)
}
